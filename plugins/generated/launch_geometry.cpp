#include "launch_geometry.hpp"

#include <arbiter/float16.hpp>

#include <cctype>
#include <stdexcept>

namespace arbiter::generated {

struct Formula::Node {
  enum Kind { number, variable, add, sub, mul, div, mod, ceil_div, min, max } kind;
  int64_t value = 0;                // number
  int64_t arb_problem::*field = nullptr;  // variable (or dtype_bytes when null)
  std::shared_ptr<const Node> left, right;

  int64_t eval(const arb_problem& p) const {
    switch (kind) {
      case number: return value;
      case variable: return field ? p.*field : static_cast<int64_t>(dtype_size(p.dtype));
      case add: return left->eval(p) + right->eval(p);
      case sub: return left->eval(p) - right->eval(p);
      case mul: return left->eval(p) * right->eval(p);
      case div: {
        const int64_t d = right->eval(p);
        return d == 0 ? 0 : left->eval(p) / d;
      }
      case mod: {
        const int64_t d = right->eval(p);
        return d == 0 ? 0 : left->eval(p) % d;
      }
      case ceil_div: {
        const int64_t d = right->eval(p);
        return d == 0 ? 0 : (left->eval(p) + d - 1) / d;
      }
      case min: return std::min(left->eval(p), right->eval(p));
      case max: return std::max(left->eval(p), right->eval(p));
    }
    return 0;
  }
};

namespace {

using Node = std::shared_ptr<const Formula::Node>;

// A recursive-descent parser: sum := product (('+'|'-') product)*, product := atom
// (('*'|'/'|'%') atom)*, atom := number | name | name '(' sum ',' sum ')' | '(' sum ')'.
class Parser {
 public:
  explicit Parser(const std::string& text) : text_(text) {}

  Node parse() {
    Node n = sum();
    skip();
    if (pos_ != text_.size()) error("unexpected '" + std::string(1, text_[pos_]) + "'");
    return n;
  }

 private:
  [[noreturn]] void error(const std::string& what) const {
    throw std::invalid_argument("formula '" + text_ + "', at column " + std::to_string(pos_ + 1) + ": " + what);
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
  static Node make(Formula::Node::Kind kind, Node left, Node right) {
    auto n = std::make_shared<Formula::Node>();
    n->kind = kind;
    n->left = std::move(left);
    n->right = std::move(right);
    return n;
  }
  Node sum() {
    Node n = product();
    for (;;) {
      if (take('+')) n = make(Formula::Node::add, n, product());
      else if (take('-')) n = make(Formula::Node::sub, n, product());
      else return n;
    }
  }
  Node product() {
    Node n = atom();
    for (;;) {
      if (take('*')) n = make(Formula::Node::mul, n, atom());
      else if (take('/')) n = make(Formula::Node::div, n, atom());
      else if (take('%')) n = make(Formula::Node::mod, n, atom());
      else return n;
    }
  }
  Node atom() {
    skip();
    if (take('(')) {
      Node n = sum();
      if (!take(')')) error("expected ')'");
      return n;
    }
    if (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) {
      auto n = std::make_shared<Formula::Node>();
      n->kind = Formula::Node::number;
      while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_])))
        n->value = n->value * 10 + (text_[pos_++] - '0');
      return n;
    }
    std::string name;
    while (pos_ < text_.size() && (std::isalnum(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '_'))
      name += text_[pos_++];
    if (name.empty()) error("expected a number, a name or '('");
    if (name == "ceil_div" || name == "min" || name == "max") {
      if (!take('(')) error("expected '(' after " + name);
      Node a = sum();
      if (!take(',')) error("expected ',' in " + name);
      Node b = sum();
      if (!take(')')) error("expected ')' closing " + name);
      return make(name == "ceil_div" ? Formula::Node::ceil_div
                  : name == "min"    ? Formula::Node::min
                                     : Formula::Node::max,
                  a, b);
    }
    auto n = std::make_shared<Formula::Node>();
    n->kind = Formula::Node::variable;
    static const std::pair<const char*, int64_t arb_problem::*> kFields[] = {
        {"m", &arb_problem::m},       {"n", &arb_problem::n},         {"k", &arb_problem::k},
        {"lda", &arb_problem::lda},   {"ldb", &arb_problem::ldb},     {"ldc", &arb_problem::ldc},
        {"ldd", &arb_problem::ldd},   {"rows", &arb_problem::rows},   {"cols", &arb_problem::cols},
        {"ld_x", &arb_problem::ld_x}, {"ld_y", &arb_problem::ld_y},   {"ld_residual", &arb_problem::ld_residual}};
    for (const auto& [field_name, field] : kFields)
      if (name == field_name) {
        n->field = field;
        return n;
      }
    if (name != "dtype_bytes") error("unknown name '" + name + "'");
    return n;
  }

  const std::string& text_;
  size_t pos_ = 0;
};

}  // namespace

Formula Formula::parse(const std::string& text) {
  Formula f;
  f.text_ = text;
  f.root_ = Parser(f.text_).parse();
  return f;
}

int64_t Formula::evaluate(const arb_problem& problem) const { return root_->eval(problem); }

}  // namespace arbiter::generated
