// A small JSON writer for the reports the C ABI hands out (arb_verify, arb_tune): always valid
// JSON, whatever the text it is given. Strings are escaped (quotes, backslashes, control
// characters) and made valid UTF-8 (a byte that starts no valid sequence becomes U+FFFD);
// a number that is not finite is written as null.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace arbiter {

// `text` as a JSON string literal, quotes included.
std::string json_string(std::string_view text);
// A finite number in the shortest form that reads back the same; "null" otherwise.
std::string json_number(double value);

// Builds one JSON value. Inside an object, key() comes before every value; commas are the
// writer's. Misuse (a value without its key, an unbalanced end) is a programming error.
class JsonWriter {
 public:
  JsonWriter& begin_object() { return open('{'); }
  JsonWriter& end_object() { return close('}'); }
  JsonWriter& begin_array() { return open('['); }
  JsonWriter& end_array() { return close(']'); }
  JsonWriter& key(std::string_view name);
  JsonWriter& value(std::string_view text);
  JsonWriter& value(const char* text) { return value(std::string_view(text)); }
  JsonWriter& value(const std::string& text) { return value(std::string_view(text)); }
  JsonWriter& value(bool flag);
  JsonWriter& value(int64_t number);
  JsonWriter& value(int number) { return value(static_cast<int64_t>(number)); }
  JsonWriter& value(double number);  // null if not finite
  JsonWriter& null();
  // A string, or null without one.
  JsonWriter& value(const std::optional<std::string>& text) { return text ? value(*text) : null(); }
  const std::string& text() const { return out_; }

 private:
  void before_value();
  JsonWriter& open(char bracket);
  JsonWriter& close(char bracket);
  std::string out_;
  std::vector<bool> first_;  // per open object or array: nothing written in it yet
  bool after_key_ = false;
};

}  // namespace arbiter
