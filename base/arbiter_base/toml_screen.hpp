// A pass over TOML text before toml++ sees it. toml++ 3.3.0 (Debian 12's; fixed upstream)
// reaches undefined behaviour in a release build, instead of a parse error, on text that is
// not TOML:
//   - a non-ASCII character it tests for whitespace: outside strings and comments, in an
//     unquoted value, or after a backslash in a string ("é = 1", the bytes EF BB BC 5B): the
//     test reaches __builtin_unreachable for most code points;
//   - a table header whose key starts with neither a bare-key character nor a quote
//     ("[[[1]]]", "[[=", "[ [a]]"): parse_key's precondition is assumed, not checked;
//   - a missing value ("a = [\n}", "a = [{},}") or a malformed date-time ("1979-05-27 1",
//     "1979-05-27t", "1)78-02-27 0\v"): its value scanner assumes what it was promised.
// Those found by the project's differential check (tools/fuzz/toml_screen_check.py: random
// documents through this pass and a checking build of toml++; none of Python's tomllib's
// valid documents refused) and by the parsers' fuzz targets (tools/fuzz/, toml++ built with
// its assertions on). All are invalid TOML but one: a non-ASCII character after a
// line-ending backslash in a multi-line string is valid, and refused too (write it as an
// escape, \u00e9). The pass follows TOML's lexical structure only as far as these need:
// strings (basic, literal, multi-line), comments, keys and values, and whether a '[' opens a
// table header (at the start of a statement) or an array (inside a value).
#pragma once

#include <algorithm>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace arbiter {

struct TomlScreenError {
  size_t line = 1;    // 1-based
  size_t column = 1;  // 1-based, in bytes
  std::string what;
};

// The first fault in `text`, if any.
inline std::optional<TomlScreenError> screen_toml(std::string_view text) {
  size_t at = 0;
  // The error at byte `where`, with its line and column (counted only then).
  auto error = [&](size_t where, std::string what) {
    TomlScreenError e;
    for (size_t i = 0; i < where; ++i)
      if (text[i] == '\n') {
        ++e.line;
        e.column = 1;
      } else {
        ++e.column;
      }
    e.what = std::move(what);
    return e;
  };
  auto starts = [&](std::string_view token) { return text.substr(at, token.size()) == token; };
  auto is_digit = [](char c) { return c >= '0' && c <= '9'; };
  // What ends an unquoted value for toml++: whitespace (\v and \f are line breaks to it), ',', ']', '}', '#'.
  auto terminator = [](char t) {
    return t == ' ' || t == '\t' || t == '\r' || t == '\n' || t == '\v' || t == '\f' || t == ',' || t == ']' || t == '}' ||
           t == '#';
  };
  // Does `v` have the shape of `pattern` from `from` on ('d' a digit, anything else itself)?
  auto shape = [&](std::string_view v, size_t from, std::string_view pattern) {
    if (from > v.size() || v.size() - from < pattern.size()) return false;
    for (size_t i = 0; i < pattern.size(); ++i)
      if (pattern[i] == 'd' ? !is_digit(v[from + i]) : v[from + i] != pattern[i]) return false;
    return true;
  };
  // Would toml++ read the unquoted value at `from` as a date (its first ten characters,
  // underscores skipped, with '-' as the 5th and 8th)?
  auto looks_like_date = [&](size_t from) {
    std::string first;
    for (size_t i = from; i < text.size() && first.size() < 10 && !terminator(text[i]); ++i)
      if (text[i] != '_') first += text[i];
    return first.size() == 10 && first[4] == '-' && first[7] == '-';
  };
  // A TOML date, or date-time: dddd-dd-dd, then optionally [Tt ]dd:dd:dd[.d+][Zz|(+-)dd:dd].
  auto date_time = [&](std::string_view v) {
    if (!shape(v, 0, "dddd-dd-dd")) return false;
    if (v.size() == 10) return true;
    if (!(v[10] == 'T' || v[10] == 't' || v[10] == ' ') || !shape(v, 11, "dd:dd:dd")) return false;
    size_t i = 19;
    if (i < v.size() && v[i] == '.') {
      const size_t digits = ++i;
      while (i < v.size() && is_digit(v[i])) ++i;
      if (i == digits) return false;
    }
    if (i < v.size() && (v[i] == 'Z' || v[i] == 'z')) ++i;
    else if (i < v.size() && (v[i] == '+' || v[i] == '-') && shape(v, i + 1, "dd:dd")) i += 6;
    return i == v.size();
  };
  // Skips a string opened at `at`, leaving `at` on its last character; false at the end of
  // the text (toml++ reports it) or at a backslash before a non-ASCII character (bad_escape).
  size_t bad_escape = std::string_view::npos;
  auto skip_string = [&]() -> bool {
    const char quote = text[at];
    const std::string_view triple = quote == '"' ? "\"\"\"" : "'''";
    const bool multi_line = starts(triple);
    at += multi_line ? 3 : 1;
    for (; at < text.size(); ++at) {
      const char c = text[at];
      const bool escape = c == '\\' && quote == '"';
      if (c == '\n' || (escape && !multi_line && at + 1 < text.size() && text[at + 1] == '\n')) {
        if (!multi_line) {  // unterminated: toml++ says so; the newline is the caller's
          at -= c == '\n' ? 1 : 0;
          return true;
        }
      } else if (escape) {
        // toml++ tests the characters after a backslash for whitespace (a line-ending
        // backslash trims it, newlines included): a non-ASCII one among them is the
        // unreachable case again.
        size_t next = at + 1;
        while (next < text.size() && (text[next] == ' ' || text[next] == '\t' || text[next] == '\r' || text[next] == '\n'))
          ++next;
        if (next < text.size() && static_cast<unsigned char>(text[next]) >= 0x80) {
          bad_escape = next;
          return false;
        }
        ++at;  // the escaped character
      } else if (c == quote && (!multi_line || starts(triple))) {
        // A multi-line string may end with up to two more quotes ("""a"""" is a"): they are
        // part of it.
        if (multi_line) {
          at += 2;
          for (int extra = 0; extra < 2 && at + 1 < text.size() && text[at + 1] == quote; ++extra) ++at;
        }
        return true;
      }
    }
    return false;
  };

  if (starts("\xEF\xBB\xBF")) at = 3;  // a byte-order mark (toml++ skips it)
  std::string open;             // the arrays ('[') and inline tables ('{') open inside a value
  bool in_header = false;       // between a table header's '[' and its ']'
  bool in_key = true;           // in a key: from a statement's start, '{' or an inline table's ',' to '='
  char last = '\n';             // the last character outside strings, whitespace and comments
  auto statement_start = [&] { return open.empty() && !in_header && last == '\n'; };
  auto in_array = [&] { return !open.empty() && open.back() == '['; };
  for (; at < text.size(); ++at) {
    const unsigned char c = static_cast<unsigned char>(text[at]);
    if (c == '\n') {
      if (open.empty()) {  // inside an array a value goes on
        in_header = false;
        in_key = true;
        last = '\n';
      }
      continue;
    }
    if (c == ' ' || c == '\t' || c == '\r') continue;
    if (c == '#') {
      while (at + 1 < text.size() && text[at + 1] != '\n') ++at;
      continue;
    }
    const bool value_position = !in_key && (last == '=' || (in_array() && (last == '[' || last == ',')));
    const bool key_position = in_key && (last == '\n' || last == '{' || last == ',' || last == '.' || last == '[');
    // A string where a key or a value may start (toml++ reads three quotes as a multi-line
    // string in a key too, before it refuses it); a quote anywhere else is junk toml++ stops
    // at, and what follows is looked at as code.
    if ((c == '"' || c == '\'') && (value_position || key_position)) {
      if (!skip_string()) {
        if (bad_escape == std::string_view::npos) return std::nullopt;
        return error(bad_escape, "a backslash before a non-ASCII character in a string");
      }
      last = '"';
      continue;
    }
    if (c >= 0x80) return error(at, "a non-ASCII character outside a string or comment");
    // A value missing where one must be (toml++ 3.3.0 assumes it is there).
    if (value_position && (c == '}' || c == ',' || (c == ']' && !in_array())))
      return error(at, "a value is missing before this character");
    // An unquoted value (a number, a date, a boolean): toml++ reads it up to a terminator,
    // whatever brackets or quotes it holds, and tests every character it meets.
    if (value_position && c != '"' && c != '\'' && c != '[' && c != '{') {
      const size_t token = at;
      for (; at < text.size(); ++at) {
        if (terminator(text[at])) break;
        if (static_cast<unsigned char>(text[at]) >= 0x80) return error(at, "a non-ASCII character outside a string or comment");
      }
      // A value that starts as a date: toml++ reads it as a date-time (with a space for the T
      // when a digit follows it), and a malformed one reaches an assumption. toml++ takes a value
      // for a date when its first ten characters, underscores skipped, have '-' 5th and 8th,
      // whatever the others are ("1)78-02-27 0"): nothing else in TOML has a '-' there, so only a
      // well-formed date or date-time may start so.
      if (looks_like_date(token)) {
        if (at - token == 10 && at + 1 < text.size() && text[at] == ' ' && is_digit(text[at + 1]))
          for (++at; at < text.size() && !terminator(text[at]); ++at)
            if (static_cast<unsigned char>(text[at]) >= 0x80)
              return error(at, "a non-ASCII character outside a string or comment");
        if (!date_time(text.substr(token, at - token))) return error(token, "a malformed date or date-time");
      }
      last = 'v';
      --at;  // the terminator is the loop's
      continue;
    }
    if (statement_start() && c == '[') {
      in_header = true;
      size_t key = at + 1;
      if (key < text.size() && text[key] == '[') ++key;
      while (key < text.size() && (text[key] == ' ' || text[key] == '\t')) ++key;
      const char first = key < text.size() ? text[key] : '\n';
      const bool bare = (first >= 'A' && first <= 'Z') || (first >= 'a' && first <= 'z') ||
                        (first >= '0' && first <= '9') || first == '_' || first == '-';
      if (!bare && first != '"' && first != '\'')
        return error(key, "a table header whose name starts with neither a bare-key character nor a quote");
      at = key - 1;
      last = '[';
      continue;
    }
    last = static_cast<char>(c);
    if (in_header) {
      if (c == ']') in_header = false;
      continue;
    }
    if (c == '=') in_key = false;
    if (c == '[' || c == '{') open += static_cast<char>(c);
    // A closed array or inline table is a value: what follows it is no key ("[{},}" misses a value).
    if ((c == ']' || c == '}') && !open.empty()) {
      open.pop_back();
      in_key = false;
    }
    if (c == '{' || (c == ',' && !open.empty() && open.back() == '{')) in_key = true;
  }
  return std::nullopt;
}

}  // namespace arbiter
