#include "source_rewriter.hpp"

#include <algorithm>
#include <cctype>

namespace arbiter::emucc {
namespace {

enum class Kind { identifier, number, literal, punctuation, directive };

struct Token {
  Kind kind;
  size_t begin, end;  // in the source
  int line;           // of the token's first character, per the line markers
  int file;           // index into Tokens::files
  bool system;        // inside a system header
};

struct Tokens {
  std::string_view source;
  std::vector<Token> list;
  std::vector<std::string> files;
  std::string_view text(size_t i) const { return source.substr(list[i].begin, list[i].end - list[i].begin); }
  bool is(size_t i, std::string_view s) const { return i < list.size() && text(i) == s; }
  bool punct(size_t i, char c) const {
    return i < list.size() && list[i].kind == Kind::punctuation && source[list[i].begin] == c;
  }
};

bool identifier_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || c == '$'; }
bool identifier_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '$'; }

// `# 12 "file" 1 3`: the next line is line 12 of file; flag 3 marks a system header.
void read_line_marker(std::string_view line, Tokens& t, int& current_line, int& current_file, bool& system) {
  size_t i = 1;
  while (i < line.size() && line[i] == ' ') ++i;
  if (i < line.size() && line.compare(i, 4, "line") == 0) i += 4;
  while (i < line.size() && line[i] == ' ') ++i;
  if (i >= line.size() || !std::isdigit(static_cast<unsigned char>(line[i]))) return;  // #pragma and the like
  int number = 0;
  while (i < line.size() && std::isdigit(static_cast<unsigned char>(line[i]))) number = number * 10 + (line[i++] - '0');
  while (i < line.size() && line[i] == ' ') ++i;
  if (i < line.size() && line[i] == '"') {
    const size_t close = line.find('"', i + 1);
    const std::string name(line.substr(i + 1, close - i - 1));
    int found = -1;
    for (size_t f = 0; f < t.files.size(); ++f)
      if (t.files[f] == name) found = static_cast<int>(f);
    if (found < 0) {
      t.files.push_back(name);
      found = static_cast<int>(t.files.size() - 1);
    }
    current_file = found;
    const std::string_view flags = close == std::string_view::npos ? std::string_view() : line.substr(close + 1);
    system = flags.find(" 3") != std::string_view::npos;
  }
  current_line = number - 1;  // the newline ending the marker advances it
}

Tokens tokenize(std::string_view s) {
  Tokens t;
  t.source = s;
  t.files.push_back("<input>");
  int line = 1, file = 0;
  bool system = false, line_start = true;
  size_t i = 0;
  while (i < s.size()) {
    const char c = s[i];
    if (c == '\n') {
      ++line;
      ++i;
      line_start = true;
      continue;
    }
    if (c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v') {
      ++i;
      continue;
    }
    if (c == '#' && line_start) {
      size_t end = s.find('\n', i);
      if (end == std::string_view::npos) end = s.size();
      t.list.push_back({Kind::directive, i, end, line, file, system});
      read_line_marker(s.substr(i, end - i), t, line, file, system);
      i = end;
      continue;
    }
    line_start = false;
    const size_t begin = i;
    // String and character literals, with their prefixes (L, u, U, u8) and raw strings.
    size_t p = i;
    while (p < s.size() && p - i < 3 && (s[p] == 'u' || s[p] == 'U' || s[p] == 'L' || s[p] == '8')) ++p;
    bool raw = p < s.size() && s[p] == 'R' && p + 1 < s.size() && s[p + 1] == '"';
    if (raw) ++p;
    if (p < s.size() && (s[p] == '"' || s[p] == '\'') && (p == i || identifier_start(s[i]))) {
      const char quote = s[p];
      size_t q = p + 1;
      if (raw) {
        const size_t open = s.find('(', q);
        const std::string closing = ")" + std::string(s.substr(q, open - q)) + "\"";
        const size_t close = s.find(closing, open);
        q = close == std::string_view::npos ? s.size() : close + closing.size();
      } else {
        while (q < s.size() && s[q] != quote) q += s[q] == '\\' ? 2 : 1;
        q = q < s.size() ? q + 1 : s.size();
      }
      for (size_t k = begin; k < q; ++k) line += s[k] == '\n';
      t.list.push_back({Kind::literal, begin, q, line, file, system});
      i = q;
      continue;
    }
    if (identifier_start(c)) {
      while (i < s.size() && identifier_char(s[i])) ++i;
      t.list.push_back({Kind::identifier, begin, i, line, file, system});
      continue;
    }
    if (std::isdigit(static_cast<unsigned char>(c)) || (c == '.' && i + 1 < s.size() && std::isdigit(static_cast<unsigned char>(s[i + 1])))) {
      ++i;
      while (i < s.size()) {
        const char d = s[i];
        if ((d == '+' || d == '-') && (s[i - 1] == 'e' || s[i - 1] == 'E' || s[i - 1] == 'p' || s[i - 1] == 'P')) ++i;
        else if (identifier_char(d) || d == '.') ++i;
        else if (d == '\'' && i + 1 < s.size() && std::isalnum(static_cast<unsigned char>(s[i + 1]))) ++i;
        else break;
      }
      t.list.push_back({Kind::number, begin, i, line, file, system});
      continue;
    }
    t.list.push_back({Kind::punctuation, begin, i + 1, line, file, system});
    ++i;
  }
  return t;
}

// The token after the one matching the opener at `open` ('(' '[' '{'), or list.size().
size_t skip_group(const Tokens& t, size_t open) {
  const char opener = t.source[t.list[open].begin];
  const char closer = opener == '(' ? ')' : opener == '[' ? ']' : '}';
  int depth = 0;
  for (size_t i = open; i < t.list.size(); ++i) {
    if (t.punct(i, opener)) ++depth;
    else if (t.punct(i, closer) && --depth == 0) return i + 1;
  }
  return t.list.size();
}

// The source text of tokens [begin, end), as written (so that '::' or '->' stay whole).
std::string join(const Tokens& t, size_t begin, size_t end) {
  if (begin >= end) return "";
  std::string out(t.source.substr(t.list[begin].begin, t.list[end - 1].end - t.list[begin].begin));
  for (char& c : out)
    if (c == '\n') c = ' ';
  return out;
}

std::string where(const Tokens& t, size_t i) {
  return t.files[static_cast<size_t>(t.list[i].file)] + ":" + std::to_string(t.list[i].line);
}

std::string c_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

class Rewriter {
 public:
  explicit Rewriter(std::string_view source) : t_(tokenize(source)) {}

  RewriteResult run() {
    for (size_t i = 0; i < t_.list.size(); ++i) {
      if (t_.list[i].kind != Kind::identifier) continue;
      const std::string_view word = t_.text(i);
      if (word == "__arbiter_shared__") {
        shared_declaration(i);
      } else if (word == "__arbiter_global__") {
        kernel(i);
      } else if ((word == "asm" || word == "__asm__" || word == "__asm") && !t_.list[i].system && asm_statement(i)) {
      } else if (word == "__assert_fail" && i > 0 && t_.punct(i - 1, ':') && !t_.list[i].system) {
        replace(i, i + 1, "::arbiter::emu::rewritten::device_assert_fail");
      } else if (word == "__arbiter_launch_bounds__" || word == "__arbiter_cluster_dims__") {
        if (!consumed(i)) error(i, std::string(word.substr(10, word.size() - 12)) + " outside a __global__ function");
      }
    }
    return finish();
  }

 private:
  struct Edit {
    size_t begin, end;  // token range replaced
    std::string text;
    bool insert_after_begin = false;  // insert `text` right after token `begin` (begin == end)
  };

  void replace(size_t begin, size_t end, std::string text) { edits_.push_back({begin, end, std::move(text), false}); }
  void insert_after(size_t token, std::string text) { edits_.push_back({token, token, std::move(text), true}); }
  void error(size_t token, const std::string& what) { result_.errors.push_back(where(t_, token) + ": " + what); }
  bool consumed(size_t token) const {
    for (const Edit& e : edits_)
      if (!e.insert_after_begin && token >= e.begin && token < e.end) return true;
    return false;
  }

  // ---- __shared__ -------------------------------------------------------------------------------
  void shared_declaration(size_t marker) {
    // Specifiers before the marker, back to the start of the statement.
    size_t first = marker;
    bool dynamic = false;
    std::string align = "0";
    while (first > 0) {
      const size_t p = first - 1;
      if (t_.is(p, "extern")) {
        dynamic = true;
      } else if (t_.is(p, "static") || t_.is(p, "volatile") || t_.is(p, "const")) {
      } else if (t_.punct(p, ')')) {  // alignas(...) or __attribute__((...)) before the marker
        size_t open = p, depth = 0;
        for (; open > 0; --open) {
          if (t_.punct(open, ')')) ++depth;
          if (t_.punct(open, '(') && --depth == 0) break;
        }
        if (open == 0 || !(t_.is(open - 1, "alignas") || t_.is(open - 1, "__attribute__"))) break;
        if (t_.is(open - 1, "alignas")) align = "(" + join(t_, open + 1, p) + ")";
        first = open;  // and the keyword below
      } else {
        break;
      }
      --first;
    }
    // The declaration, up to its ';' (at no depth).
    size_t end = marker + 1;
    int depth = 0;
    for (; end < t_.list.size(); ++end) {
      if (t_.punct(end, '(') || t_.punct(end, '[') || t_.punct(end, '{')) ++depth;
      if (t_.punct(end, ')') || t_.punct(end, ']') || t_.punct(end, '}')) --depth;
      if (depth == 0 && t_.punct(end, ';')) break;
      if (depth < 0) break;
    }
    if (end >= t_.list.size() || !t_.punct(end, ';')) return error(marker, "a __shared__ declaration without its ';'");
    // Alignment and specifiers after the marker; the rest is the type and the declarators.
    std::vector<size_t> type_tokens;
    for (size_t i = marker + 1; i < end; ++i) {
      if (t_.is(i, "alignas") && t_.punct(i + 1, '(')) {
        const size_t close = skip_group(t_, i + 1);
        align = "(" + join(t_, i + 2, close - 1) + ")";
        i = close - 1;
      } else if (t_.is(i, "__attribute__") && t_.punct(i + 1, '(')) {
        const size_t close = skip_group(t_, i + 1);
        const std::string attribute = join(t_, i + 2, close - 1);
        const size_t aligned = attribute.find("aligned (");
        if (aligned != std::string::npos)
          align = "(" + attribute.substr(aligned + 9, attribute.rfind(')') - aligned - 9) + ")";
        i = close - 1;
      } else if (t_.is(i, "extern")) {
        dynamic = true;
      } else if (!t_.is(i, "static")) {
        type_tokens.push_back(i);
      }
    }
    if (type_tokens.empty()) return error(marker, "an empty __shared__ declaration");
    // Declarators, split at top-level commas (a '<' ... '>' counts as a level too).
    std::vector<std::vector<size_t>> declarators(1);
    int nest = 0;
    for (size_t i : type_tokens) {
      if (t_.punct(i, '(') || t_.punct(i, '[') || t_.punct(i, '<')) ++nest;
      if (t_.punct(i, ')') || t_.punct(i, ']') || t_.punct(i, '>')) --nest;
      if (nest == 0 && t_.punct(i, ',')) declarators.emplace_back();
      else declarators.back().push_back(i);
    }
    // The base type: the first declarator's tokens before its pointer operators and name.
    const std::vector<size_t>& d0 = declarators[0];
    size_t name0 = d0.size();
    for (size_t k = 0; k < d0.size(); ++k) {
      if (t_.punct(d0[k], '[')) break;
      if (t_.list[d0[k]].kind == Kind::identifier) name0 = k;
    }
    if (name0 == 0 || name0 == d0.size()) return error(marker, "a __shared__ declaration emucc cannot read");
    size_t base_end = name0;
    while (base_end > 0 && (t_.punct(d0[base_end - 1], '*') || t_.punct(d0[base_end - 1], '&') ||
                            t_.is(d0[base_end - 1], "const") || t_.is(d0[base_end - 1], "__restrict")))
      --base_end;
    const std::string base = join(t_, d0[0], d0[base_end - 1] + 1);
    std::string out;
    for (size_t d = 0; d < declarators.size(); ++d) {
      const std::vector<size_t>& tokens = declarators[d];
      const size_t start = d == 0 ? base_end : 0;
      std::string pointers, name, dims;
      size_t name_at = tokens.size();
      for (size_t k = start; k < tokens.size(); ++k) {
        const std::string_view text = t_.text(tokens[k]);
        if (t_.list[tokens[k]].kind == Kind::identifier && text != "const" && text != "__restrict") {
          name = std::string(text);
          name_at = k;
          break;
        }
        pointers += std::string(text) + " ";
      }
      if (name_at + 1 < tokens.size()) dims = join(t_, tokens[name_at + 1], tokens.back() + 1);
      if (name.empty()) return error(marker, "a __shared__ declarator without a name");
      const int id = counter_++;
      if (dynamic) {
        if (dims != "[]" || !pointers.empty()) return error(marker, "extern __shared__ must declare an array of unknown size");
        out += "auto* const " + name + " = ::arbiter::emu::rewritten::dynamic_shared<" + base + ">(" + align + "); ";
      } else {
        out += "static char __arbiter_shared_tag_" + std::to_string(id) + "; auto& " + name +
               " = ::arbiter::emu::rewritten::shared_variable<" + base + " " + pointers + dims +
               ">(&__arbiter_shared_tag_" + std::to_string(id) + ", " + align + ");";
      }
      ++result_.shared_declarations;
    }
    replace(first, end + 1, out);
  }

  // ---- __global__ functions -------------------------------------------------------------------------
  void kernel(size_t marker) {
    replace(marker, marker + 1, "");
    ++result_.kernels;
    std::string bounds[3] = {"0", "0", "0"}, cluster[3] = {"0", "0", "0"};
    size_t i = marker + 1;
    int depth = 0;
    for (; i < t_.list.size(); ++i) {
      if (t_.is(i, "__arbiter_launch_bounds__") || t_.is(i, "__arbiter_cluster_dims__")) {
        const bool is_bounds = t_.is(i, "__arbiter_launch_bounds__");
        const size_t close = skip_group(t_, i + 1);
        std::vector<std::string> args;
        int nest = 0;
        size_t arg_begin = i + 2;
        for (size_t k = i + 2; k + 1 <= close; ++k) {
          const bool end = k + 1 == close;
          if (!end && (t_.punct(k, '(') || t_.punct(k, '[') || t_.punct(k, '<'))) ++nest;
          if (!end && (t_.punct(k, ')') || t_.punct(k, ']') || t_.punct(k, '>'))) --nest;
          if (end || (nest == 0 && t_.punct(k, ','))) {
            args.push_back(join(t_, arg_begin, k));
            arg_begin = k + 1;
          }
        }
        std::string* target = is_bounds ? bounds : cluster;
        for (size_t a = 0; a < args.size() && a < 3; ++a) target[a] = "(" + args[a] + ")";
        if (!is_bounds) {
          if (args.size() < 2) cluster[1] = "1";
          if (args.size() < 3) cluster[2] = "1";
        }
        replace(i, close, "");
        i = close - 1;
        continue;
      }
      if (t_.punct(i, '(')) ++depth;
      if (t_.punct(i, ')')) --depth;
      if (depth == 0 && (t_.punct(i, ';') || t_.punct(i, '{'))) break;
    }
    if (i >= t_.list.size() || t_.punct(i, ';')) return;  // a declaration: nothing to run
    insert_after(i, " ::arbiter::emu::kernel_entry(::arbiter::emu::KernelAttributes{" + bounds[0] + ", " + bounds[1] +
                        ", " + bounds[2] + ", static_cast<unsigned>(" + cluster[0] + "), static_cast<unsigned>(" +
                        cluster[1] + "), static_cast<unsigned>(" + cluster[2] + ")});");
  }

  // ---- asm statements ---------------------------------------------------------------------------------
  // Is the asm at `i` a statement (not a declaration's asm label)?
  bool statement_position(size_t i) const {
    if (i == 0) return false;
    const size_t p = i - 1;
    if (t_.punct(p, ';') || t_.punct(p, '{') || t_.punct(p, '}') || t_.is(p, "else") || t_.is(p, "do")) return true;
    if (t_.punct(p, ':')) return !(p > 0 && t_.punct(p - 1, ':'));  // a label, not a scope
    if (t_.punct(p, ')')) {  // if (...) asm, while (...) asm, for (...) asm
      int depth = 0;
      for (size_t k = p + 1; k-- > 0;) {
        if (t_.punct(k, ')')) ++depth;
        if (t_.punct(k, '(') && --depth == 0)
          return k > 0 && (t_.is(k - 1, "if") || t_.is(k - 1, "while") || t_.is(k - 1, "for") || t_.is(k - 1, "switch"));
      }
    }
    return false;
  }

  bool asm_statement(size_t start) {
    if (!statement_position(start)) return false;
    size_t i = start + 1;
    while (t_.is(i, "volatile") || t_.is(i, "__volatile__") || t_.is(i, "__volatile") || t_.is(i, "inline") ||
           t_.is(i, "goto"))
      ++i;
    if (!t_.punct(i, '(')) return false;
    const size_t close = skip_group(t_, i);
    if (close >= t_.list.size() || !t_.punct(close, ';')) return error(start, "an asm statement without its ';'"), true;
    // Sections: template, outputs, inputs, clobbers, split at the colons directly inside.
    std::vector<std::vector<size_t>> sections(1);
    int depth = 0;
    for (size_t k = i + 1; k + 1 < close; ++k) {
      if (t_.punct(k, '(') || t_.punct(k, '[') || t_.punct(k, '{')) ++depth;
      if (t_.punct(k, ')') || t_.punct(k, ']') || t_.punct(k, '}')) --depth;
      if (depth == 0 && t_.punct(k, ':')) sections.emplace_back();
      else sections.back().push_back(k);
    }
    std::string text;
    for (size_t k : sections[0]) {
      if (t_.list[k].kind != Kind::literal) return error(start, "an asm template emucc cannot read"), true;
      text += std::string(t_.text(k)) + " ";
    }
    std::vector<std::string> operands;
    for (size_t s = 1; s < 3 && s < sections.size(); ++s) {
      const std::vector<size_t>& tokens = sections[s];
      size_t k = 0;
      while (k < tokens.size()) {
        if (t_.punct(tokens[k], '[')) {  // a symbolic name: %[name] is not supported
          return error(start, "named asm operands ([name]) are not supported by the emulator"), true;
        }
        if (t_.list[tokens[k]].kind != Kind::literal) return error(start, "an asm operand emucc cannot read"), true;
        const std::string_view constraint = t_.text(tokens[k]);  // with its quotes
        if (k + 1 >= tokens.size() || !t_.punct(tokens[k + 1], '('))
          return error(start, "an asm operand without its (expression)"), true;
        const size_t open = tokens[k + 1];
        const size_t after = skip_group(t_, open);
        const std::string expression = join(t_, open + 1, after - 1);
        char letter = 0;
        bool write = false, read_too = false;
        for (size_t c = 1; c + 1 < constraint.size(); ++c) {
          const char ch = constraint[c];
          if (ch == '=') write = true;
          else if (ch == '+') write = read_too = true;
          else if (ch == '&') continue;
          else if (!letter) letter = ch;
        }
        if (std::string_view("rlhfdnci").find(letter) == std::string_view::npos || letter == 0)
          return error(start, "asm constraint " + std::string(constraint) + " is not supported by the emulator"), true;
        if (letter == 'i') letter = 'n';
        if (s == 1 && !write) return error(start, "an asm output without '=' or '+'"), true;
        if (write)
          operands.push_back(std::string("::arbiter::emu::rewritten::asm_output('") + letter + "', " +
                             (read_too ? "true" : "false") + ", " + expression + ")");
        else
          operands.push_back(std::string("::arbiter::emu::rewritten::asm_input('") + letter + "', " + expression + ")");
        // Past the operand and its comma.
        k += 2;
        while (k < tokens.size() && tokens[k] < after) ++k;
        if (k < tokens.size() && t_.punct(tokens[k], ',')) ++k;
      }
    }
    const std::string id = std::to_string(counter_++);
    std::string out = "{ static ::arbiter::emu::AsmSite __arbiter_asm_site_" + id + "{" + text + ", " +
                      c_string(t_.files[static_cast<size_t>(t_.list[start].file)]) + ", " +
                      std::to_string(t_.list[start].line) + "}; ";
    if (operands.empty()) {
      out += "::arbiter::emu::run_asm(__arbiter_asm_site_" + id + ", nullptr, 0); }";
    } else {
      out += "::arbiter::emu::AsmOperand __arbiter_asm_operands_" + id + "[] = {";
      for (size_t o = 0; o < operands.size(); ++o) out += (o ? ", " : "") + operands[o];
      out += "}; ::arbiter::emu::run_asm(__arbiter_asm_site_" + id + ", __arbiter_asm_operands_" + id + ", " +
             std::to_string(operands.size()) + "); }";
    }
    replace(start, close + 1, out);
    ++result_.asm_statements;
    return true;
  }

  // ---- output -----------------------------------------------------------------------------------------
  RewriteResult finish() {
    // Edits in token order; text between tokens is copied, newlines of a replaced range kept.
    std::vector<const Edit*> order;
    for (const Edit& e : edits_) order.push_back(&e);
    std::stable_sort(order.begin(), order.end(), [](const Edit* a, const Edit* b) { return a->begin < b->begin; });
    std::string& out = result_.text;
    out.reserve(t_.source.size() + 1024);
    size_t copied = 0;  // source offset copied so far
    for (const Edit* e : order) {
      if (e->insert_after_begin) {
        const size_t at = t_.list[e->begin].end;
        if (at < copied) continue;
        out.append(t_.source.substr(copied, at - copied));
        out += e->text;
        copied = at;
        continue;
      }
      const size_t from = t_.list[e->begin].begin;
      const size_t to = e->end < t_.list.size() ? t_.list[e->end - 1].end : t_.source.size();
      if (from < copied) continue;  // inside an earlier edit
      out.append(t_.source.substr(copied, from - copied));
      out += e->text;
      for (size_t k = from; k < to; ++k)
        if (t_.source[k] == '\n') out += '\n';
      copied = to;
    }
    out.append(t_.source.substr(copied));
    return std::move(result_);
  }

  Tokens t_;
  std::vector<Edit> edits_;
  RewriteResult result_;
  int counter_ = 0;
};

}  // namespace

RewriteResult rewrite_cuda_source(std::string_view preprocessed) { return Rewriter(preprocessed).run(); }

}  // namespace arbiter::emucc
