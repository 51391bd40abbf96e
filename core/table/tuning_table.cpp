#include "table/tuning_table.hpp"

#include "common/failure.hpp"
#include "common/string_literal.hpp"
#include "config/toml_section.hpp"

#include <fmt/format.h>

#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <chrono>
#include <ctime>
#include <functional>
#include <sstream>

namespace arbiter {
namespace {

uint64_t entry_hash(const std::string& key, const std::string& device) {
  return std::hash<std::string>{}(key) * 0x9E3779B97F4A7C15ull ^ std::hash<std::string>{}(device);
}

TableEntry read_entry(const toml::table& table, const std::string& source, size_t index) {
  Section s(table, fmt::format("entry[{}]", index), source, ARB_ERR_TABLE);
  TableEntry e;
  e.key = s.required_string("key");
  e.device = s.required_string("device");
  e.kernel = s.required_string("kernel");
  if (e.kernel.find('.') == std::string::npos) s.error_at("kernel", "'kernel' must be \"<plugin>.<kernel>\"");
  e.plugin_version = s.required_string("plugin_version");
  e.build_id = s.required_string("build_id");
  e.runtime_version = s.string("runtime_version").value_or("");
  e.plugin_sha256 = s.string("plugin_sha256").value_or("");
  e.median_us = s.required_number("median_us");
  e.p20_us = s.required_number("p20_us");
  e.p80_us = s.required_number("p80_us");
  e.samples = s.required_integer("samples");
  e.noise = s.number("noise").value_or(0.0);
  e.runner_up = s.string("runner_up").value_or("");
  e.margin = s.number("margin").value_or(0.0);
  e.verified = s.required_boolean("verified");
  e.verification = s.string("verification").value_or("");
  e.workspace_bytes = s.integer("workspace_bytes").value_or(0);
  e.when = s.string("when").value_or("");
  if (!(e.median_us > 0) || e.samples < 1) s.error(table, "an entry needs median_us > 0 and samples >= 1");
  s.finish();
  return e;
}

DeviceFingerprint read_device(const toml::table& table, const std::string& id, const std::string& source) {
  Section s(table, "devices." + id, source, ARB_ERR_TABLE);
  DeviceFingerprint d;
  d.kind = s.required_string("kind");
  d.name = s.required_string("name");
  d.details = s.string("details").value_or("");
  s.finish();
  if (d.id() != id) s.error(table, fmt::format("device id '{}' does not match its fingerprint ({})", id, d.id()));
  return d;
}


// The fast reader's pieces. Each accepts only a form to_toml() writes, and only where toml++
// reads it to the same value; anything else is false (the caller falls back to toml++).

// "<name> = " at the start of the line: the value after it.
template <size_t N>
inline bool value_of(std::string_view line, const char (&name)[N], std::string_view& value) {
  constexpr size_t n = N - 1;
  if (line.size() < n + 3 || std::memcmp(line.data(), name, n) != 0 || line[n] != ' ' || line[n + 1] != '=' ||
      line[n + 2] != ' ')
    return false;
  value = line.substr(n + 3);
  return true;
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// The length of the valid UTF-8 sequence (2 to 4 bytes) at s[i], or 0.
size_t utf8_sequence(std::string_view s, size_t i) {
  const auto at = [&](size_t k) { return i + k < s.size() ? static_cast<unsigned char>(s[i + k]) : 0u; };
  const unsigned c = at(0);
  const auto cont = [&](size_t k, unsigned lo = 0x80, unsigned hi = 0xBF) { return at(k) >= lo && at(k) <= hi; };
  if (c >= 0xC2 && c <= 0xDF) return cont(1) ? 2 : 0;
  if (c == 0xE0) return cont(1, 0xA0) && cont(2) ? 3 : 0;
  if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) return cont(1) && cont(2) ? 3 : 0;
  if (c == 0xED) return cont(1, 0x80, 0x9F) && cont(2) ? 3 : 0;  // no surrogates
  if (c == 0xF0) return cont(1, 0x90) && cont(2) && cont(3) ? 4 : 0;
  if (c >= 0xF1 && c <= 0xF3) return cont(1) && cont(2) && cont(3) ? 4 : 0;
  if (c == 0xF4) return cont(1, 0x80, 0x8F) && cont(2) && cont(3) ? 4 : 0;
  return 0;
}

// Whether none of the 8 bytes needs a closer look in a basic string: a quote, a backslash, a
// control character, DEL or a byte of a multi-byte character.
bool plain8(uint64_t x) {
  constexpr uint64_t ones = 0x0101010101010101ull, high = 0x8080808080808080ull;
  const auto has_zero = [&](uint64_t y) { return ((y - ones) & ~y & high) != 0; };
  if ((x & high) != 0) return false;
  return ((x - ones * 0x20) & ~x & high) == 0 && ((x + ones) & high) == 0 && !has_zero(x ^ (ones * '"')) &&
         !has_zero(x ^ (ones * '\\'));
}

// How many leading bytes of a string body are certainly plain (no quote, backslash, control
// character, DEL or non-ASCII byte): body.size() when all are, else at most the first special
// one's index. 16 bytes at a time; a byte below 0x20 as a signed char is a control character
// or part of a multi-byte character.
size_t plain_prefix(std::string_view body) {
  size_t i = 0;
#ifdef __SSE2__
  const auto special16 = [&](size_t at) {
    const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(body.data() + at));
    const __m128i special =
        _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(x, _mm_set1_epi8('"')), _mm_cmpeq_epi8(x, _mm_set1_epi8('\\'))),
                     _mm_or_si128(_mm_cmplt_epi8(x, _mm_set1_epi8(0x20)), _mm_cmpeq_epi8(x, _mm_set1_epi8(0x7F))));
    return _mm_movemask_epi8(special) != 0;
  };
  for (; i + 16 <= body.size(); i += 16)
    if (special16(i)) return i;
  if (body.size() >= 16) return special16(body.size() - 16) ? i : body.size();  // the tail, overlapping
#endif
  uint64_t word;
  for (; i + 8 <= body.size(); i += 8) {
    std::memcpy(&word, body.data() + i, 8);
    if (!plain8(word)) return i;
  }
  if (body.size() >= 8 && i < body.size()) {
    std::memcpy(&word, body.data() + body.size() - 8, 8);
    return plain8(word) ? body.size() : i;
  }
  while (i < body.size() && body[i] >= 0x20 && body[i] < 0x7F && body[i] != '"' && body[i] != '\\') ++i;
  return i;
}

// A basic string that is the whole value: what string_literal() writes.
bool read_string(std::string_view v, std::string& out) {
  if (v.size() < 2 || v.front() != '"' || v.back() != '"') return false;
  const std::string_view body = v.substr(1, v.size() - 2);
  size_t i = plain_prefix(body);
  if (i == body.size()) {  // nothing to unescape or check: the usual case
    out.assign(body.data(), body.size());
    return true;
  }
  out.clear();
  out.reserve(body.size());
  size_t plain = 0;  // start of the run of plain bytes not yet copied
  for (; i < body.size();) {
    const auto c = static_cast<unsigned char>(body[i]);
    if ((c >= 0x20 && c < 0x7F && c != '"' && c != '\\') || c == '\t') {
      ++i;
      continue;
    }
    if (c >= 0x80) {
      const size_t n = utf8_sequence(body, i);
      if (n == 0) return false;
      i += n;
      continue;
    }
    if (c != '\\' || i + 1 >= body.size()) return false;  // a quote inside, a control character, DEL
    out.append(body.data() + plain, i - plain);
    switch (body[i + 1]) {
      case '"': out += '"'; break;
      case '\\': out += '\\'; break;
      case 'n': out += '\n'; break;
      case 't': out += '\t'; break;
      case 'r': out += '\r'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'u': {
        if (i + 6 > body.size()) return false;
        uint32_t cp = 0;
        for (size_t k = 2; k < 6; ++k) {
          const int d = hex_digit(body[i + k]);
          if (d < 0) return false;
          cp = cp * 16 + static_cast<uint32_t>(d);
        }
        if (cp >= 0xD800 && cp <= 0xDFFF) return false;
        append_utf8(out, cp);
        i += 4;
        break;
      }
      default:
        return false;
    }
    i += 2;
    plain = i;
  }
  out.append(body.data() + plain, body.size() - plain);
  return true;
}

// read_string without keeping the value: no copy unless there is an escape to check.
bool check_string(std::string_view v) {
  if (v.size() < 2 || v.front() != '"' || v.back() != '"') return false;
  if (plain_prefix(v.substr(1, v.size() - 2)) == v.size() - 2) return true;
  std::string scratch;
  return read_string(v, scratch);
}

// -?(0|[1-9][0-9]*): the integers to_toml() writes, in range.
bool read_integer(std::string_view v, int64_t& out) {
  if (v.empty() || v.size() > 20) return false;
  const size_t digits = v[0] == '-' ? 1 : 0;
  if (digits >= v.size() || (v[digits] == '0' && v.size() > digits + 1)) return false;
  uint64_t n = 0;
  for (size_t i = digits; i < v.size(); ++i) {
    if (v[i] < '0' || v[i] > '9') return false;
    n = n * 10 + static_cast<uint64_t>(v[i] - '0');
  }
  if (v.size() - digits <= 18) {  // below 10^18: no overflow
    out = digits ? -static_cast<int64_t>(n) : static_cast<int64_t>(n);
    return true;
  }
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
  return ec == std::errc() && end == v.data() + v.size();
}

// What fmt's {:.6g} writes for a finite double: an integer, or -?(0|[1-9][0-9]*)(.[0-9]+)?(e[+-]?[0-9]+)?.
bool read_number(std::string_view v, double& out) {
  if (v.empty() || v.size() > 24) return false;
  const bool negative = v[0] == '-';
  size_t i = negative ? 1 : 0;
  const size_t first = i;
  // Clinger's fast path: at most 15 digits and a power of ten up to 22 are exact doubles, so
  // one multiplication or division rounds once, as from_chars does.
  uint64_t mantissa = 0;  // wraps past 19 digits, unused then
  int digits = 0, scale = 0;
  for (; i < v.size() && v[i] >= '0' && v[i] <= '9'; ++i, ++digits)
    mantissa = mantissa * 10 + static_cast<uint64_t>(v[i] - '0');
  if (digits == 0 || (v[first] == '0' && digits > 1)) return false;
  if (i == v.size()) {  // an integer in TOML, read as one and widened: "-0" is +0.0
    if (digits > 15) return false;
    const auto n = static_cast<int64_t>(mantissa);
    out = static_cast<double>(negative ? -n : n);
    return true;
  }
  if (v[i] == '.') {
    const size_t fraction = ++i;
    for (; i < v.size() && v[i] >= '0' && v[i] <= '9'; ++i, ++digits, --scale)
      mantissa = mantissa * 10 + static_cast<uint64_t>(v[i] - '0');
    if (i == fraction) return false;
  }
  if (i < v.size() && v[i] == 'e') {
    ++i;
    const bool below_one = i < v.size() && v[i] == '-';
    if (i < v.size() && (v[i] == '+' || v[i] == '-')) ++i;
    const size_t exponent = i;
    int e = 0;
    for (; i < v.size() && v[i] >= '0' && v[i] <= '9'; ++i) e = std::min(e * 10 + (v[i] - '0'), 100000);
    if (i == exponent) return false;
    scale += below_one ? -e : e;
  }
  if (i != v.size()) return false;
  static constexpr double kPowers[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                                       1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
  if (digits <= 15 && scale >= -22 && scale <= 22) {
    const double m = static_cast<double>(mantissa);
    out = scale >= 0 ? m * kPowers[scale] : m / kPowers[-scale];
    if (negative) out = -out;
    return true;
  }
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), out, std::chars_format::general);
  return ec == std::errc() && end == v.data() + v.size() && std::isfinite(out);
}

bool read_boolean(std::string_view v, bool& out) {
  if (v == "true") return out = true, true;
  if (v == "false") return out = false, true;
  return false;
}

bool bare_key(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-')) return false;
  return true;
}

}  // namespace

bool WrittenTableReader::line(std::string_view l) {
  const std::string_view whole = l;
  if (!l.empty() && l.back() == '\n') l.remove_suffix(1);
  if (l.empty()) return true;
  if (l[0] == '#') {  // ASCII comments only (to_toml() writes no other)
    for (char c : l)
      if (!((c >= 0x20 && c < 0x7F) || c == '\t')) return false;
    return true;
  }
  if (l[0] == '[') {
    if (phase_ == Phase::start || !end_section()) return false;
    if (l == "[[entry]]") {
      phase_ = Phase::entry;
      field_ = 0;
      raw_.clear();
      span_ = {};
      return true;
    }
    constexpr std::string_view kDevices = "[devices.";
    if (phase_ == Phase::entry || l.size() <= kDevices.size() + 1 || l.compare(0, kDevices.size(), kDevices) != 0 ||
        l.back() != ']')
      return false;  // devices come before entries in what to_toml() writes
    const std::string_view id = l.substr(kDevices.size(), l.size() - kDevices.size() - 1);
    if (!bare_key(id)) return false;
    device_id_.assign(id);
    phase_ = Phase::device;
    field_ = 0;
    return true;
  }
  std::string_view v;
  switch (phase_) {
    case Phase::start:
      if (l != "schema = 1") return false;  // TuningTable::kSchema
      phase_ = Phase::root;
      return true;
    case Phase::root:
      return false;
    case Phase::device: {
      bool ok = false;
      switch (field_++) {
        case 0: ok = value_of(l, "kind", v) && read_string(v, device_.kind); break;
        case 1: ok = value_of(l, "name", v) && read_string(v, device_.name); break;
        case 2: ok = value_of(l, "details", v) && read_string(v, device_.details); break;
        default: break;
      }
      return ok;
    }
    case Phase::entry:
      break;
  }
  if (sink_) {  // the entry's lines: a view while they are contiguous in the caller's buffer
    if (whole.data() == span_.data() + span_.size()) {
      span_ = std::string_view(span_.data(), span_.size() + whole.size());
    } else {
      raw_.append(span_);
      span_ = whole;
    }
  }
  if (field_ == 2)  // the device is known: the rest of an entry not stored is only checked
    store_ = !sink_ && (keep_ == nullptr || std::find(keep_->begin(), keep_->end(), entry_.device) != keep_->end());
  if (!entry_field(field_++, l, entry_, store_)) return false;
  return field_ < 18 || complete_entry();
}

void WrittenTableReader::flush() {
  raw_.append(span_);
  span_ = {};
}

// Inlined into line(): one call less per line.
__attribute__((always_inline)) inline bool WrittenTableReader::entry_field(size_t field, std::string_view l,
                                                                           TableEntry& e, bool store) {
  std::string_view v;
  const auto string = [&](std::string& out) { return store ? read_string(v, out) : check_string(v); };
  switch (field) {
    case 0: return value_of(l, "key", v) && read_string(v, e.key);
    case 1: return value_of(l, "device", v) && read_string(v, e.device);
    case 2: return value_of(l, "kernel", v) && read_string(v, e.kernel);
    case 3: return value_of(l, "plugin_version", v) && string(e.plugin_version);
    case 4: return value_of(l, "build_id", v) && string(e.build_id);
    case 5: return value_of(l, "runtime_version", v) && string(e.runtime_version);
    case 6: return value_of(l, "plugin_sha256", v) && string(e.plugin_sha256);
    case 7: return value_of(l, "median_us", v) && read_number(v, e.median_us);
    case 8: return value_of(l, "p20_us", v) && read_number(v, e.p20_us);
    case 9: return value_of(l, "p80_us", v) && read_number(v, e.p80_us);
    case 10: return value_of(l, "samples", v) && read_integer(v, e.samples);
    case 11: return value_of(l, "noise", v) && read_number(v, e.noise);
    case 12: return value_of(l, "runner_up", v) && string(e.runner_up);
    case 13: return value_of(l, "margin", v) && read_number(v, e.margin);
    case 14: return value_of(l, "verified", v) && read_boolean(v, e.verified);
    case 15: return value_of(l, "verification", v) && string(e.verification);
    case 16: return value_of(l, "workspace_bytes", v) && read_integer(v, e.workspace_bytes);
    case 17: return value_of(l, "when", v) && string(e.when);
    default: return false;
  }
}

bool WrittenTableReader::parse_entry(std::string_view raw, TableEntry& out) {
  size_t field = 0;
  while (!raw.empty()) {
    const size_t end = raw.find('\n');
    if (!entry_field(field++, raw.substr(0, end), out, true)) return false;
    raw = end == std::string_view::npos ? std::string_view() : raw.substr(end + 1);
  }
  return field == 18;
}

// Closes the device or entry being read: complete, and valid as read_device/read_entry require.
bool WrittenTableReader::end_section() {
  if (phase_ == Phase::device) {
    if (field_ != 3 || device_.id() != device_id_ || table_.devices_.count(device_id_) != 0) return false;
    table_.devices_.emplace(device_id_, device_);
  } else if (phase_ == Phase::entry) {
    return field_ == 18;  // complete_entry() ran at its last line
  }
  return true;
}

// The entry's last line is read: checked as read_entry checks it, and stored, handed to the
// sink or counted (while its lines are still in the caller's buffer).
bool WrittenTableReader::complete_entry() {
  {
    TableEntry& e = entry_;
    if (e.kernel.find('.') == std::string::npos || !(e.median_us > 0) || e.samples < 1) return false;
    if (e.device != known_device_) {  // entries of one device come in runs
      if (table_.devices_.count(e.device) == 0) return false;
      known_device_ = e.device;
      known_device_hash_ = std::hash<std::string>{}(e.device);
    }
    // The device's hash once per run of entries of one device (known_device_).
    const size_t key_hash = std::hash<std::string>{}(e.key);
    const uint64_t hash = key_hash * 0x9E3779B97F4A7C15ull ^ known_device_hash_;
    seen_.push_back(hash);
    if (keep_ != nullptr && std::find(keep_->begin(), keep_->end(), e.device) == keep_->end()) {
      ++table_.left_out_;  // checked, not kept: entry_'s strings are reused for the next one
    } else if (sink_) {  // entry_ holds key, device and kernel only
      if (raw_.empty()) {
        sink_(e, span_, key_hash);
      } else {
        raw_.append(span_);
        sink_(e, raw_, key_hash);
      }
    } else {
      table_.index_.emplace(hash, table_.entries_.size());
      table_.entries_.push_back(std::move(e));
      e = TableEntry();
    }
  }
  return true;
}

bool WrittenTableReader::finish(TuningTable& out) {
  if (phase_ == Phase::start || !end_section()) return false;
  phase_ = Phase::root;
  std::sort(seen_.begin(), seen_.end());
  if (std::adjacent_find(seen_.begin(), seen_.end()) != seen_.end()) return false;  // a duplicate (or a collision)
  out = std::move(table_);
  return true;
}

bool WrittenTableReader::read(std::string_view text, TuningTable& out, const std::vector<std::string>* keep) {
  WrittenTableReader reader(keep);
  while (!text.empty()) {
    const size_t end = text.find('\n');
    const size_t next = end == std::string_view::npos ? text.size() : end + 1;
    if (!reader.line(text.substr(0, next))) return false;
    text.remove_prefix(next);
  }
  return reader.finish(out);
}

void TuningTable::keep_only(const std::vector<std::string>& keep) {
  const size_t dropped =
      remove_if([&](const TableEntry& e) { return std::find(keep.begin(), keep.end(), e.device) == keep.end(); });
  left_out_ += dropped;
}

TuningTable TuningTable::parse(std::string_view text, const std::string& source) {
  TuningTable table;
  if (WrittenTableReader::read(text, table)) return table;
  return parse_general(text, source);
}

TuningTable TuningTable::parse_general(std::string_view text, const std::string& source) {
  const toml::table document = parse_toml(text, source, ARB_ERR_TABLE);
  TuningTable table;
  Section root(document, "", source, ARB_ERR_TABLE);
  const int64_t schema = root.required_integer("schema");
  if (schema != kSchema)
    root.error_at("schema", fmt::format("schema {} is not supported (this arbiter reads schema {})", schema, kSchema));
  if (const toml::table* devices = root.table("devices")) {
    for (const auto& [id, node] : *devices) {
      if (!node.is_table()) root.wrong_type(node, "devices." + std::string(id.str()), "a table");
      table.devices_[std::string(id.str())] = read_device(*node.as_table(), std::string(id.str()), source);
    }
  }
  if (const toml::node* node = root.find("entry")) {
    const toml::array* entries = node->as_array();
    if (entries == nullptr) root.wrong_type(*node, "entry", "an array of tables ([[entry]])");
    size_t index = 0;
    for (const toml::node& item : *entries) {
      if (!item.is_table()) root.wrong_type(item, "entry", "an array of tables ([[entry]])");
      TableEntry entry = read_entry(*item.as_table(), source, index++);
      if (table.devices_.count(entry.device) == 0)
        fail(ARB_ERR_TABLE, toml_position(source, item.source().begin) + ": entry for unknown device '" + entry.device + "'");
      if (table.find(entry.key, entry.device) != nullptr)
        fail(ARB_ERR_TABLE, toml_position(source, item.source().begin) + ": a second entry for '" + entry.key + "'");
      table.index_.emplace(entry_hash(entry.key, entry.device), table.entries_.size());
      table.entries_.push_back(std::move(entry));
    }
  }
  root.finish();
  return table;
}

std::string TuningTable::to_toml() const {
  std::ostringstream out;
  out << "# arbiter tuning table: one entry per problem and device, written by `arbiter tune`\n"
         "# (and by contexts with table.policy = tune-missing or retune). docs/table-format.md\n"
      << "schema = " << kSchema << "\n";
  for (const auto& [id, device] : devices_) {
    out << "\n[devices." << id << "]\n"
        << "kind = " << string_literal(device.kind) << "\nname = " << string_literal(device.name) << "\ndetails = " << string_literal(device.details)
        << "\n";
  }
  for (const TableEntry& e : entries_) {
    out << "\n[[entry]]\n"
        << "key = " << string_literal(e.key) << "\n"
        << "device = " << string_literal(e.device) << "\n"
        << "kernel = " << string_literal(e.kernel) << "\n"
        << "plugin_version = " << string_literal(e.plugin_version) << "\n"
        << "build_id = " << string_literal(e.build_id) << "\n"
        << "runtime_version = " << string_literal(e.runtime_version) << "\n"
        << "plugin_sha256 = " << string_literal(e.plugin_sha256) << "\n"
        << fmt::format("median_us = {:.6g}\np20_us = {:.6g}\np80_us = {:.6g}\nsamples = {}\nnoise = {:.4g}\n", e.median_us,
                       e.p20_us, e.p80_us, e.samples, e.noise)
        << "runner_up = " << string_literal(e.runner_up) << "\n"
        << fmt::format("margin = {:.4g}\n", e.margin) << "verified = " << (e.verified ? "true" : "false") << "\n"
        << "verification = " << string_literal(e.verification) << "\n"
        << "workspace_bytes = " << e.workspace_bytes << "\n"
        << "when = " << string_literal(e.when) << "\n";
  }
  return out.str();
}

void TuningTable::put(const TableEntry& entry, const DeviceFingerprint& device) {
  devices_[device.id()] = device;
  const uint64_t hash = entry_hash(entry.key, entry.device);
  if (const size_t at = position(entry.key, entry.device, hash); at < entries_.size()) {
    entries_[at] = entry;
  } else {
    index_.emplace(hash, entries_.size());
    entries_.push_back(entry);
  }
}

size_t TuningTable::position(const std::string& key, const std::string& device, uint64_t hash) const {
  const auto [begin, end] = index_.equal_range(hash);
  for (auto it = begin; it != end; ++it)
    if (entries_[it->second].key == key && entries_[it->second].device == device) return it->second;
  return entries_.size();
}

const TableEntry* TuningTable::find(const std::string& key, const std::string& device) const {
  const size_t at = position(key, device, entry_hash(key, device));
  return at < entries_.size() ? &entries_[at] : nullptr;
}

void TuningTable::reindex() {
  index_.clear();
  for (size_t i = 0; i < entries_.size(); ++i) index_.emplace(entry_hash(entries_[i].key, entries_[i].device), i);
}

std::string utc_now() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm utc{};
  gmtime_r(&now, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

}  // namespace arbiter
