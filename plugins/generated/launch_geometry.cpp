#include "launch_geometry.hpp"

#include <arbiter/float16.hpp>

#include <algorithm>
#include <cctype>
#include <iterator>
#include <limits>
#include <stdexcept>

namespace arbiter::generated {
namespace {

using Step = Formula::Step;

struct FieldName {
  const char* name;
  int64_t arb_problem::*member;  // null: dtype_bytes, which the problem holds as its dtype
};
constexpr FieldName kFieldNames[] = {
    {"m", &arb_problem::m},       {"n", &arb_problem::n},       {"k", &arb_problem::k},
    {"lda", &arb_problem::lda},   {"ldb", &arb_problem::ldb},   {"ldc", &arb_problem::ldc},
    {"ldd", &arb_problem::ldd},   {"rows", &arb_problem::rows}, {"cols", &arb_problem::cols},
    {"ld_x", &arb_problem::ld_x}, {"ld_y", &arb_problem::ld_y}, {"ld_residual", &arb_problem::ld_residual},
    {"batch", &arb_problem::batch}, {"q_len", &arb_problem::q_len}, {"kv_len", &arb_problem::kv_len},
    {"heads", &arb_problem::heads}, {"kv_heads", &arb_problem::kv_heads}, {"dtype_bytes", nullptr}};
static_assert(std::size(kFieldNames) <= 32, "Formula::fields_used_ has a bit per field");

int64_t field_value(const FieldName& field, const arb_problem& p) {
  return field.member ? p.*field.member : static_cast<int64_t>(dtype_size(p.dtype));
}

// The evaluation stack never holds more than three pending values per nesting level (a sum's
// left side, a product's left side, a call's first argument) plus the result; the parser
// checks the bound, so evaluation needs no allocation and no bounds test.
constexpr size_t kStackCapacity = 4 * (Formula::kMaxNesting + 1);

// A formula quoted in a message is cut short: a 200,000-character one would drown it.
std::string excerpt(const std::string& text) {
  constexpr size_t kMax = 80;
  return text.size() <= kMax ? text : text.substr(0, kMax) + "...";
}

// A recursive-descent parser emitting postfix steps: sum := product (('+'|'-') product)*,
// product := atom (('*'|'/'|'%') atom)*, atom := number | name | name '(' sum ',' sum ')' |
// '(' sum ')'. It recurses once per nesting level, so the nesting is limited.
class Parser {
 public:
  Parser(const std::string& text, std::vector<Step>& steps, uint32_t& fields_used)
      : text_(text), steps_(steps), fields_used_(fields_used) {}

  void parse() {
    sum();
    skip();
    if (pos_ != text_.size()) error("unexpected '" + std::string(1, text_[pos_]) + "'");
  }

 private:
  // One level of parentheses or of a call, refused past the limit.
  class Nested {
   public:
    explicit Nested(Parser& parser) : parser_(parser) {
      if (++parser_.depth_ > Formula::kMaxNesting) {
        --parser_.pos_;  // the column of the '(' just taken
        parser_.error("parentheses and calls nested deeper than " + std::to_string(Formula::kMaxNesting) +
                      " levels (the limit)");
      }
    }
    ~Nested() { --parser_.depth_; }
    Nested(const Nested&) = delete;
    Nested& operator=(const Nested&) = delete;

   private:
    Parser& parser_;
  };

  [[noreturn]] void error(const std::string& what) const {
    throw std::invalid_argument("formula '" + excerpt(text_) + "', at column " + std::to_string(pos_ + 1) + ": " + what);
  }
  void skip() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  bool take(char c) {
    skip();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool digit_here() const { return pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_])); }

  void push_value(Step step) {
    if (++height_ > kStackCapacity) error("too complex to evaluate");  // unreachable within kMaxNesting
    steps_.push_back(step);
  }
  // Combines the two values on top of the stack: the text from `begin` to here.
  void push_operation(Step::Kind kind, size_t begin) {
    --height_;
    Step step;
    step.kind = kind;
    step.begin = begin;
    step.end = pos_;
    steps_.push_back(step);
  }

  void sum() {
    skip();
    const size_t begin = pos_;
    product();
    for (;;) {
      Step::Kind kind;
      if (take('+')) kind = Step::add;
      else if (take('-')) kind = Step::sub;
      else return;
      product();
      push_operation(kind, begin);
    }
  }
  void product() {
    skip();
    const size_t begin = pos_;
    atom();
    for (;;) {
      Step::Kind kind;
      if (take('*')) kind = Step::mul;
      else if (take('/')) kind = Step::div;
      else if (take('%')) kind = Step::mod;
      else return;
      atom();
      push_operation(kind, begin);
    }
  }
  void atom() {
    skip();
    const size_t begin = pos_;
    if (take('(')) {
      const Nested level(*this);
      sum();
      if (!take(')')) error("expected ')'");
      return;
    }
    if (digit_here()) return number(begin);
    std::string name;
    while (pos_ < text_.size() && (std::isalnum(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '_'))
      name += text_[pos_++];
    if (name.empty()) error("expected a number, a name or '('");
    if (name == "ceil_div" || name == "min" || name == "max") {
      if (!take('(')) error("expected '(' after " + name);
      const Nested level(*this);
      sum();
      if (!take(',')) error("expected ',' in " + name);
      sum();
      if (!take(')')) error("expected ')' closing " + name);
      return push_operation(name == "ceil_div" ? Step::ceil_div : name == "min" ? Step::min : Step::max, begin);
    }
    for (size_t i = 0; i < std::size(kFieldNames); ++i) {
      if (name != kFieldNames[i].name) continue;
      fields_used_ |= 1u << i;
      Step step;
      step.kind = kFieldNames[i].member ? Step::field : Step::dtype_bytes;
      step.member = kFieldNames[i].member;
      step.begin = begin;
      step.end = pos_;
      return push_value(step);
    }
    error("unknown name '" + name + "'");
  }
  void number(size_t begin) {
    Step step;
    while (digit_here()) {
      const int digit = text_[pos_++] - '0';
      if (__builtin_mul_overflow(step.value, 10, &step.value) || __builtin_add_overflow(step.value, digit, &step.value)) {
        while (digit_here()) ++pos_;
        const std::string literal = text_.substr(begin, pos_ - begin);
        pos_ = begin;
        error("the number " + excerpt(literal) + " does not fit in int64 (at most " +
              std::to_string(std::numeric_limits<int64_t>::max()) + ")");
      }
    }
    step.begin = begin;
    step.end = pos_;
    push_value(step);
  }

  const std::string& text_;
  std::vector<Step>& steps_;
  uint32_t& fields_used_;
  size_t pos_ = 0;
  int depth_ = 0;      // of parentheses and calls around the parser's position
  size_t height_ = 0;  // of the evaluation stack after the steps so far
};

// a (op) b into `result`, or why it has no int64 value.
const char* apply(Step::Kind kind, int64_t a, int64_t b, int64_t& result) {
  static constexpr const char* kOverflow = "overflows int64";
  static constexpr const char* kByZero = "divides by zero";
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  switch (kind) {
    case Step::add: return __builtin_add_overflow(a, b, &result) ? kOverflow : nullptr;
    case Step::sub: return __builtin_sub_overflow(a, b, &result) ? kOverflow : nullptr;
    case Step::mul: return __builtin_mul_overflow(a, b, &result) ? kOverflow : nullptr;
    case Step::div:
      if (b == 0) return kByZero;
      if (a == kMin && b == -1) return kOverflow;
      result = a / b;
      return nullptr;
    case Step::mod:
      if (b == 0) return kByZero;
      result = b == -1 ? 0 : a % b;  // INT64_MIN % -1 is 0, but traps on x86
      return nullptr;
    case Step::ceil_div: {
      if (b == 0) return kByZero;
      if (a == kMin && b == -1) return kOverflow;
      // Truncation, then one up when the exact quotient is positive and not whole: no a + b - 1
      // to overflow, and right for negative operands too.
      const int64_t remainder = a % b;
      result = a / b + (remainder != 0 && (remainder < 0) == (b < 0) ? 1 : 0);
      return nullptr;
    }
    case Step::min: result = std::min(a, b); return nullptr;
    case Step::max: result = std::max(a, b); return nullptr;
    default: return "is not an operation";  // values are pushed, never applied
  }
}

std::string operation_text(Step::Kind kind, int64_t a, int64_t b) {
  const std::string x = std::to_string(a), y = std::to_string(b);
  switch (kind) {
    case Step::add: return x + " + " + y;
    case Step::sub: return x + " - " + y;
    case Step::mul: return x + " * " + y;
    case Step::div: return x + " / " + y;
    case Step::mod: return x + " % " + y;
    case Step::ceil_div: return "ceil_div(" + x + ", " + y + ")";
    case Step::min: return "min(" + x + ", " + y + ")";
    case Step::max: return "max(" + x + ", " + y + ")";
    default: return x;
  }
}

}  // namespace

Formula Formula::parse(const std::string& text) {
  Formula f;
  f.text_ = text;
  Parser(f.text_, f.steps_, f.fields_used_).parse();
  return f;
}

std::optional<int64_t> Formula::evaluate(const arb_problem& p, std::string& why) const {
  if (steps_.empty()) return 0;
  int64_t stack[kStackCapacity];
  size_t top = 0;
  for (const Step& step : steps_) {
    switch (step.kind) {
      case Step::number: stack[top++] = step.value; continue;
      case Step::field: stack[top++] = p.*step.member; continue;
      case Step::dtype_bytes: stack[top++] = static_cast<int64_t>(dtype_size(p.dtype)); continue;
      default: break;
    }
    const int64_t a = stack[top - 2], b = stack[top - 1];
    int64_t result = 0;
    if (const char* failure = apply(step.kind, a, b, result)) {
      why = describe_failure(step, a, b, failure, p);
      return std::nullopt;
    }
    stack[--top - 1] = result;
  }
  return stack[0];
}

int64_t Formula::evaluate(const arb_problem& problem) const {
  std::string why;
  if (const std::optional<int64_t> value = evaluate(problem, why)) return *value;
  throw std::range_error(why);
}

std::string Formula::describe_failure(const Step& step, int64_t a, int64_t b, const char* failure,
                                      const arb_problem& problem) const {
  std::string fields;
  for (size_t i = 0; i < std::size(kFieldNames); ++i)
    if (fields_used_ & (1u << i))
      fields += (fields.empty() ? "" : ", ") + std::string(kFieldNames[i].name) + " = " +
                std::to_string(field_value(kFieldNames[i], problem));
  return "formula '" + excerpt(text_) + "'" + (fields.empty() ? "" : " with " + fields) + ": '" +
         excerpt(text_.substr(step.begin, step.end - step.begin)) + "' is " + operation_text(step.kind, a, b) +
         ", which " + failure;
}

std::optional<LaunchDims> launch_dims(const Formula (&grid)[3], const Formula (&block)[3], const Formula& shared_bytes,
                                      const arb_problem& problem, std::string& why) {
  static constexpr const char* kAxes[3] = {"x", "y", "z"};
  LaunchDims dims;
  // One formula's value, within [least, most]; `what` names it in the message.
  auto value_in = [&](const Formula& f, const std::string& what, int64_t least, int64_t most) -> std::optional<int64_t> {
    std::string failure;
    const std::optional<int64_t> v = f.evaluate(problem, failure);
    if (!v) {
      why = what + ": " + failure;
      return std::nullopt;
    }
    if (*v < least || *v > most) {
      why = what + " is " + std::to_string(*v) + " (formula '" + excerpt(f.text()) + "'): CUDA takes " +
            std::to_string(least) + " to " + std::to_string(most);
      return std::nullopt;
    }
    return v;
  };
  for (int axis = 0; axis < 3; ++axis) {
    const auto g = value_in(grid[axis], std::string("grid ") + kAxes[axis], 1, kMaxGrid[axis]);
    if (!g) return std::nullopt;
    dims.grid[axis] = static_cast<uint32_t>(*g);
  }
  int64_t threads = 1;
  for (int axis = 0; axis < 3; ++axis) {
    const auto b = value_in(block[axis], std::string("block ") + kAxes[axis], 1, kMaxBlock[axis]);
    if (!b) return std::nullopt;
    dims.block[axis] = static_cast<uint32_t>(*b);
    threads *= *b;  // at most 1024 * 1024 * 64
  }
  if (threads > kMaxBlockThreads) {
    why = "block " + std::to_string(dims.block[0]) + " x " + std::to_string(dims.block[1]) + " x " +
          std::to_string(dims.block[2]) + " is " + std::to_string(threads) + " threads: CUDA takes at most " +
          std::to_string(kMaxBlockThreads);
    return std::nullopt;
  }
  const auto shared = value_in(shared_bytes, "shared_bytes", 0, kMaxSharedBytes);
  if (!shared) return std::nullopt;
  dims.shared_bytes = static_cast<size_t>(*shared);
  return dims;
}

}  // namespace arbiter::generated
