// Reading the PTX of an asm statement (PTX ISA, "Syntax" and "Instruction Statements"):
// statements end with ';', `{` and `}` open and close a scope, `.reg .type name;` declares
// registers (name<N> declares N of them), `label:` names the next instruction, `@p` / `@!p`
// guards one. Comments (// and /* */) are skipped.
#include "program.hpp"

#include <cctype>
#include <cstring>
#include <stdexcept>

namespace arbiter::emu::ptx {

bool Instruction::has(const char* part) const {
  for (const std::string& p : parts)
    if (p == part) return true;
  return false;
}

namespace {

struct Lexer {
  const std::string& s;
  size_t i = 0;
  int line = 1;

  [[noreturn]] void fail(const std::string& what) const {
    throw std::runtime_error("line " + std::to_string(line) + ": " + what);
  }
  void skip_space() {
    for (;;) {
      while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) line += s[i++] == '\n';
      if (s.compare(i, 2, "//") == 0) {
        while (i < s.size() && s[i] != '\n') ++i;
      } else if (s.compare(i, 2, "/*") == 0) {
        const size_t end = s.find("*/", i + 2);
        for (size_t k = i; k < std::min(end, s.size()); ++k) line += s[k] == '\n';
        i = end == std::string::npos ? s.size() : end + 2;
      } else {
        return;
      }
    }
  }
  bool at_end() {
    skip_space();
    return i >= s.size();
  }
  char peek() {
    skip_space();
    return i < s.size() ? s[i] : '\0';
  }
  bool accept(char c) {
    if (peek() != c) return false;
    ++i;
    return true;
  }
  void expect(char c) {
    if (!accept(c)) fail(std::string("expected '") + c + "'");
  }
  static bool word_char(char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '$' || c == '.' || c == '%' || c == ':';
  }
  // A word: an opcode with its modifiers, a register, a label, a directive, a number.
  std::string word() {
    skip_space();
    const size_t begin = i;
    while (i < s.size() && word_char(s[i])) {
      // "a:" ending a label is not part of the word; "shared::cta" is.
      if (s[i] == ':' && !(i + 1 < s.size() && s[i + 1] == ':') && !(i > begin && s[i - 1] == ':')) break;
      ++i;
    }
    return s.substr(begin, i - begin);
  }
};

bool is_number(const std::string& w) {
  return !w.empty() && (std::isdigit(static_cast<unsigned char>(w[0])) || (w[0] == '-' && w.size() > 1));
}

uint64_t parse_number(const std::string& w, Lexer& lex) {
  std::string t = w;
  bool negative = false;
  if (!t.empty() && t[0] == '-') {
    negative = true;
    t = t.substr(1);
  }
  uint64_t v = 0;
  try {
    if (t.size() > 2 && t[0] == '0' && (t[1] == 'f' || t[1] == 'F' || t[1] == 'd' || t[1] == 'D')) {
      v = std::stoull(t.substr(2), nullptr, 16);  // float bits
    } else if (t.size() > 2 && t[0] == '0' && (t[1] == 'x' || t[1] == 'X')) {
      v = std::stoull(t.substr(2), nullptr, 16);
    } else {
      if (!t.empty() && (t.back() == 'U' || t.back() == 'u')) t.pop_back();
      v = std::stoull(t, nullptr, 10);
    }
  } catch (const std::exception&) {
    lex.fail("a number PTX does not have: " + w);
  }
  return negative ? ~v + 1 : v;
}

class Parser {
 public:
  explicit Parser(const std::string& text) : lex_{text} {}

  Program run() {
    while (!lex_.at_end()) statement();
    for (Instruction& in : program_.instructions)
      for (Operand& o : in.operands) resolve_labels(o);
    return std::move(program_);
  }

 private:
  void resolve_labels(Operand& o) {
    if (o.kind == Operand::Kind::label) {
      for (size_t k = 0; k < program_.labels.size(); ++k)
        if (program_.labels[k].first == o.name) {
          o.index = static_cast<int>(program_.labels[k].second);
          return;
        }
      throw std::runtime_error("no label " + o.name);
    }
    for (Operand& e : o.elements) resolve_labels(e);
  }

  int local(const std::string& name) const {
    for (size_t k = scopes_.size(); k-- > 0;)
      for (int index : scopes_[k])
        if (program_.locals[static_cast<size_t>(index)].name == name) return index;
    return -1;
  }

  void statement() {
    if (lex_.accept('{')) {
      scopes_.emplace_back();
      return;
    }
    if (lex_.accept('}')) {
      if (scopes_.size() > 1) scopes_.pop_back();
      return;
    }
    if (lex_.accept(';')) return;
    int guard = -1;
    bool guard_negated = false;
    if (lex_.accept('@')) {
      guard_negated = lex_.accept('!');
      const std::string p = lex_.word();
      guard = local(p);
      if (guard < 0) lex_.fail("an unknown predicate " + p);
    }
    const int line = lex_.line;
    const std::string first = lex_.word();
    if (first.empty()) lex_.fail(std::string("unexpected '") + lex_.peek() + "'");
    if (guard < 0 && lex_.accept(':')) {  // a label
      program_.labels.emplace_back(first, program_.instructions.size());
      return;
    }
    if (first == ".reg") return declare();
    if (first[0] == '.') lex_.fail("the directive " + first + " in inline PTX is not emulated");
    Instruction in;
    in.opcode = first;
    in.guard = guard;
    in.guard_negated = guard_negated;
    in.line = line;
    size_t start = 0;
    for (size_t k = 0; k <= first.size(); ++k)
      if (k == first.size() || (first[k] == '.' && !(k > 0 && first[k - 1] == ':'))) {
        in.parts.push_back(first.substr(start, k - start));
        start = k + 1;
      }
    if (lex_.peek() != ';') {
      do in.operands.push_back(operand());
      while (lex_.accept(','));
    }
    lex_.expect(';');
    program_.instructions.push_back(std::move(in));
  }

  void declare() {
    // .reg .type name[<N>] [, name[<N>]]... ;
    const std::string type = lex_.word();
    const int bits = type == ".pred" ? 1
                     : type.size() > 2 ? std::atoi(type.c_str() + 2)
                                       : 32;
    do {
      const std::string name = lex_.word();
      if (name.empty()) lex_.fail("a .reg without a name");
      int count = 0;
      if (lex_.accept('<')) {
        count = static_cast<int>(parse_number(lex_.word(), lex_));
        lex_.expect('>');
      }
      auto add = [&](const std::string& n) {
        program_.locals.push_back({n, bits > 0 ? bits : 32});
        scopes_.back().push_back(static_cast<int>(program_.locals.size() - 1));
      };
      if (count == 0) add(name);
      for (int k = 0; k < count; ++k) add(name + std::to_string(k));
    } while (lex_.accept(','));
    lex_.expect(';');
  }

  Operand operand() {
    Operand o;
    if (lex_.accept('{')) {
      o.kind = Operand::Kind::vector;
      if (!lex_.accept('}')) {
        do o.elements.push_back(operand());
        while (lex_.accept(','));
        lex_.expect('}');
      }
      return o;
    }
    if (lex_.accept('[')) {
      o.kind = Operand::Kind::address;
      o.elements.push_back(operand());
      for (;;) {
        if (lex_.accept('+')) {
          o.value += parse_number(lex_.word(), lex_);
        } else if (lex_.accept('-')) {
          o.value -= parse_number(lex_.word(), lex_);
        } else if (lex_.accept(',')) {
          o.elements.push_back(operand());  // tensor coordinates, a vector
        } else {
          break;
        }
      }
      lex_.expect(']');
      return o;
    }
    bool negated = lex_.accept('!');
    const bool minus = lex_.accept('-');
    const std::string w = (minus ? "-" : "") + lex_.word();
    if (w.empty()) lex_.fail(std::string("an operand cannot start with '") + lex_.peek() + "'");
    if (w == "_") {
      o.kind = Operand::Kind::sink;
    } else if (w.size() > 1 && w[0] == '%' && std::isdigit(static_cast<unsigned char>(w[1]))) {
      o.kind = Operand::Kind::asm_operand;
      o.index = std::atoi(w.c_str() + 1);
    } else if (is_number(w)) {
      o.kind = Operand::Kind::immediate;
      o.value = parse_number(w, lex_);
    } else if (const int l = local(w.rfind("%%", 0) == 0 ? w.substr(1) : w); l >= 0) {
      o.kind = Operand::Kind::local;
      o.index = l;
    } else if (w[0] == '%') {
      o.kind = Operand::Kind::special;
      o.name = w.rfind("%%", 0) == 0 ? w.substr(1) : w;  // %% in a GNU asm template is one %
    } else {
      o.kind = Operand::Kind::label;
      o.name = w;
    }
    o.negated = negated;
    if (lex_.accept('|')) {  // d|p
      Operand pair;
      pair.kind = Operand::Kind::pair;
      pair.elements.push_back(o);
      pair.elements.push_back(operand());
      return pair;
    }
    return o;
  }

  Lexer lex_;
  Program program_;
  std::vector<std::vector<int>> scopes_{1};
};

}  // namespace

Program parse(const std::string& text) { return Parser(text).run(); }

}  // namespace arbiter::emu::ptx
