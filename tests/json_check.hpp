// A strict JSON reader (RFC 8259) for the tests of the reports the C ABI hands out: a
// report must parse here whole (no trailing text, no raw control character in a string,
// valid UTF-8, numbers in JSON's own grammar), and its fields can then be compared.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace arbiter::test {

struct Json {
  enum class Kind { null, boolean, number, string, array, object };
  Kind kind = Kind::null;
  bool boolean = false;
  double number = 0;
  std::string string;
  std::vector<Json> items;                            // array
  std::vector<std::pair<std::string, Json>> fields;  // object, in order

  bool is_null() const { return kind == Kind::null; }
  bool has(std::string_view key) const {
    for (const auto& [name, value] : fields)
      if (name == key) return true;
    return false;
  }
  const Json& operator[](std::string_view key) const {
    if (kind != Kind::object) throw std::runtime_error("not an object, looking for \"" + std::string(key) + "\"");
    for (const auto& [name, value] : fields)
      if (name == key) return value;
    throw std::runtime_error("no field \"" + std::string(key) + "\"");
  }
  const Json& operator[](size_t index) const {
    if (kind != Kind::array || index >= items.size()) throw std::runtime_error("no item " + std::to_string(index));
    return items[index];
  }
  const std::string& str() const {
    if (kind != Kind::string) throw std::runtime_error("not a string");
    return string;
  }
  double num() const {
    if (kind != Kind::number) throw std::runtime_error("not a number");
    return number;
  }
  bool flag() const {
    if (kind != Kind::boolean) throw std::runtime_error("not a boolean");
    return boolean;
  }
};

class JsonReader {
 public:
  // Throws std::runtime_error naming the offset of the first error.
  static Json parse(std::string_view text) {
    JsonReader reader(text);
    reader.space();
    Json value = reader.value(0);
    reader.space();
    if (reader.at_ != text.size()) reader.error("text after the value");
    return value;
  }

 private:
  explicit JsonReader(std::string_view text) : text_(text) {}

  [[noreturn]] void error(const std::string& what) const {
    throw std::runtime_error("JSON at offset " + std::to_string(at_) + ": " + what);
  }
  bool done() const { return at_ >= text_.size(); }
  char peek() const { return done() ? '\0' : text_[at_]; }
  void expect(char c) {
    if (peek() != c) error(std::string("expected '") + c + "'");
    ++at_;
  }
  void literal(std::string_view word) {
    if (text_.substr(at_, word.size()) != word) error("expected " + std::string(word));
    at_ += word.size();
  }
  void space() {
    while (!done() && (peek() == ' ' || peek() == '\t' || peek() == '\n' || peek() == '\r')) ++at_;
  }

  Json value(int depth) {
    if (depth > 64) error("nested too deep");
    Json v;
    switch (peek()) {
      case '{': {
        v.kind = Json::Kind::object;
        ++at_;
        space();
        if (peek() == '}') {
          ++at_;
          return v;
        }
        for (;;) {
          space();
          if (peek() != '"') error("expected a key");
          std::string key = string();
          space();
          expect(':');
          space();
          v.fields.emplace_back(std::move(key), value(depth + 1));
          space();
          if (peek() == ',') {
            ++at_;
            continue;
          }
          expect('}');
          return v;
        }
      }
      case '[': {
        v.kind = Json::Kind::array;
        ++at_;
        space();
        if (peek() == ']') {
          ++at_;
          return v;
        }
        for (;;) {
          space();
          v.items.push_back(value(depth + 1));
          space();
          if (peek() == ',') {
            ++at_;
            continue;
          }
          expect(']');
          return v;
        }
      }
      case '"': v.kind = Json::Kind::string; v.string = string(); return v;
      case 't': literal("true"); v.kind = Json::Kind::boolean; v.boolean = true; return v;
      case 'f': literal("false"); v.kind = Json::Kind::boolean; return v;
      case 'n': literal("null"); return v;
      default: v.kind = Json::Kind::number; v.number = number(); return v;
    }
  }

  double number() {
    const size_t start = at_;
    if (peek() == '-') ++at_;
    if (peek() == '0') {
      ++at_;
    } else if (peek() >= '1' && peek() <= '9') {
      while (peek() >= '0' && peek() <= '9') ++at_;
    } else {
      error("expected a value");
    }
    if (peek() == '.') {
      ++at_;
      if (!(peek() >= '0' && peek() <= '9')) error("expected a digit after '.'");
      while (peek() >= '0' && peek() <= '9') ++at_;
    }
    if (peek() == 'e' || peek() == 'E') {
      ++at_;
      if (peek() == '+' || peek() == '-') ++at_;
      if (!(peek() >= '0' && peek() <= '9')) error("expected a digit in the exponent");
      while (peek() >= '0' && peek() <= '9') ++at_;
    }
    return std::strtod(std::string(text_.substr(start, at_ - start)).c_str(), nullptr);
  }

  static void append_utf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xc0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xe0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    } else {
      out += static_cast<char>(0xf0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    }
  }

  uint32_t hex4() {
    uint32_t value = 0;
    for (int i = 0; i < 4; ++i, ++at_) {
      const char c = peek();
      value <<= 4;
      if (c >= '0' && c <= '9') value |= static_cast<uint32_t>(c - '0');
      else if (c >= 'a' && c <= 'f') value |= static_cast<uint32_t>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F') value |= static_cast<uint32_t>(c - 'A' + 10);
      else error("bad \\u escape");
    }
    return value;
  }

  // One UTF-8 sequence, checked (no overlong form, surrogate or value above U+10FFFF).
  void utf8(std::string& out) {
    const auto byte = [&](size_t i) { return static_cast<unsigned char>(text_[i]); };
    const unsigned char lead = byte(at_);
    size_t length = lead < 0x80 ? 1 : lead >= 0xc2 && lead <= 0xdf ? 2 : lead >= 0xe0 && lead <= 0xef ? 3
                                    : lead >= 0xf0 && lead <= 0xf4 ? 4 : 0;
    if (length == 0 || at_ + length > text_.size()) error("invalid UTF-8");
    unsigned char low = 0x80, high = 0xbf;
    if (lead == 0xe0) low = 0xa0;
    if (lead == 0xed) high = 0x9f;
    if (lead == 0xf0) low = 0x90;
    if (lead == 0xf4) high = 0x8f;
    if (length > 1 && (byte(at_ + 1) < low || byte(at_ + 1) > high)) error("invalid UTF-8");
    for (size_t i = 2; i < length; ++i)
      if (byte(at_ + i) < 0x80 || byte(at_ + i) > 0xbf) error("invalid UTF-8");
    out.append(text_.substr(at_, length));
    at_ += length;
  }

  std::string string() {
    expect('"');
    std::string out;
    for (;;) {
      if (done()) error("unterminated string");
      const char c = peek();
      if (c == '"') {
        ++at_;
        return out;
      }
      if (static_cast<unsigned char>(c) < 0x20) error("a raw control character in a string");
      if (c != '\\') {
        utf8(out);
        continue;
      }
      ++at_;
      const char e = peek();
      ++at_;
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          uint32_t cp = hex4();
          if (cp >= 0xd800 && cp <= 0xdbff) {
            literal("\\u");
            const uint32_t low = hex4();
            if (low < 0xdc00 || low > 0xdfff) error("a lone surrogate");
            cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
          } else if (cp >= 0xdc00 && cp <= 0xdfff) {
            error("a lone surrogate");
          }
          append_utf8(out, cp);
          break;
        }
        default: --at_; error("bad escape");
      }
    }
  }

  std::string_view text_;
  size_t at_ = 0;
};

}  // namespace arbiter::test
