#include "table/tuning_table.hpp"

#include "common/failure.hpp"
#include "common/string_literal.hpp"
#include "config/toml_section.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <sstream>

namespace arbiter {
namespace {

std::string index_key(const std::string& key, const std::string& device) { return key + '\n' + device; }

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


}  // namespace

TuningTable TuningTable::parse(std::string_view text, const std::string& source) {
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
      table.index_.emplace(index_key(entry.key, entry.device), table.entries_.size());
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
  auto [it, inserted] = index_.emplace(index_key(entry.key, entry.device), entries_.size());
  if (inserted) {
    entries_.push_back(entry);
  } else {
    entries_[it->second] = entry;
  }
}

const TableEntry* TuningTable::find(const std::string& key, const std::string& device) const {
  auto it = index_.find(index_key(key, device));
  return it == index_.end() ? nullptr : &entries_[it->second];
}

void TuningTable::reindex() {
  index_.clear();
  for (size_t i = 0; i < entries_.size(); ++i) index_.emplace(index_key(entries_[i].key, entries_[i].device), i);
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
