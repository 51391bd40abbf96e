// arbiter table show [PATH] | diff A B | merge OUT IN... | prune [PATH]
// PATH defaults to the configured table.path (--table=PATH or the config).
#include "cli.hpp"
#include "arbiter_base/counted.hpp"

#include "common/failure.hpp"
#include "table/table_file.hpp"
#include "support/table_merge.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <set>
#include <utility>

namespace arbiter::cli {
namespace {

std::string table_path(const Arguments& args, const Context& context, size_t index) {
  if (args.positional.size() > index) return args.positional[index];
  if (!context.config().table.path.empty()) return context.config().table.path;
  fail(ARB_ERR_INVALID_ARGUMENT, "which table? give a path, --table=PATH, or table.path in the config");
}

// The fingerprint ids of this machine's devices (the CPU, and the GPU when there is one).
std::vector<std::string> device_ids(const Context& context) {
  std::vector<std::string> ids;
  for (const Device* d : {context.devices().cpu, context.devices().cuda})
    if (d != nullptr) ids.push_back(d->fingerprint().id());
  return ids;
}

// The entry's status on this machine: "valid", "stale: why" or "other device: name".
std::string status_here(Context& context, const TuningTable& table, const TableEntry& e) {
  const std::vector<std::string> here = device_ids(context);
  if (std::find(here.begin(), here.end(), e.device) == here.end())
    return "other device: " + table.devices().at(e.device).name;
  arb_problem problem{};
  const std::string why = stale_reason(e, context.registry(), context.gate(), &problem);
  return why.empty() ? "valid" : "stale: " + why;
}

int show(const Arguments& args, Context& context) {
  const std::string path = table_path(args, context, 1);
  const TuningTable table = load_table_file(path);
  fmt::print("table: {} (schema {}), {}, {}; this machine: {}\n", path, TuningTable::kSchema,
             counted(static_cast<long long>(table.entries().size()), "entry", "entries"),
             counted(static_cast<long long>(table.devices().size()), "device"), fmt::join(device_ids(context), ", "));
  for (const auto& [id, d] : table.devices()) fmt::print("  device {}: {} {} [{}]\n", id, d.kind, d.name, d.details);
  int valid = 0, stale = 0, other = 0;
  fmt::print("\n| key | kernel | median us | margin | verified | here |\n| --- | --- | ---: | ---: | --- | --- |\n");
  for (const TableEntry& e : table.entries()) {
    const std::string status = status_here(context, table, e);
    (status == "valid" ? valid : status.rfind("stale", 0) == 0 ? stale : other) += 1;
    fmt::print("| {} | {} | {:.3g} | {} | {} | {} |\n", e.key, e.kernel, e.median_us,
               e.runner_up.empty() ? "-" : fmt::format("{:.1f}% over {}", e.margin * 100, e.runner_up),
               e.verified ? "yes" : "no", status);
  }
  fmt::print("\n{} valid here, {} stale (ignored; `arbiter table prune` removes them), {} for other devices\n", valid,
             stale, other);
  return 0;
}

int diff(const Arguments& args) {
  if (args.positional.size() != 3) fail(ARB_ERR_INVALID_ARGUMENT, "table diff needs two tables: A B");
  const TuningTable a = load_table_file(args.positional[1]), b = load_table_file(args.positional[2]);
  int differences = 0;
  for (const TableEntry& x : a.entries()) {
    const TableEntry* y = b.find(x.key, x.device);
    if (y == nullptr) {
      fmt::print("- {} [{}]: {} {:.3g} us\n", x.key, x.device, x.kernel, x.median_us);
      ++differences;
    } else if (x.kernel != y->kernel || !same_validators(x, *y) || beats(*y, x) || beats(x, *y)) {
      fmt::print("~ {} [{}]: {} {} build {} {:.3g} us -> {} {} build {} {:.3g} us\n", x.key, x.device, x.kernel,
                 x.plugin_version, x.build_id, x.median_us, y->kernel, y->plugin_version, y->build_id, y->median_us);
      ++differences;
    }
  }
  for (const TableEntry& y : b.entries())
    if (a.find(y.key, y.device) == nullptr) {
      fmt::print("+ {} [{}]: {} {:.3g} us\n", y.key, y.device, y.kernel, y.median_us);
      ++differences;
    }
  fmt::print("{} differences (~: another kernel, other plugin build, or a time apart by more than the noise)\n",
             differences);
  return differences > 0 ? 1 : 0;
}

// One line per device and plugin whose entries in `table` were measured on different code
// (plugin version, build id, wrapped library or file hash). They do not mix: every entry
// keeps its own validators, so a machine uses those that match its plugin and reports the
// others stale. But a merged table like that says the machines did not run the same plugins.
std::vector<std::string> mixed_code(const TuningTable& table) {
  std::map<std::pair<std::string, std::string>, std::map<std::string, int>> codes;  // (device, plugin) -> code -> entries
  for (const TableEntry& e : table.entries()) {
    std::string code = e.plugin_version + " build " + e.build_id;
    if (!e.runtime_version.empty()) code += " (" + e.runtime_version + ")";
    if (!e.plugin_sha256.empty()) code += " file " + e.plugin_sha256.substr(0, 12);
    ++codes[{e.device, e.plugin()}][code];
  }
  std::vector<std::string> lines;
  for (const auto& [where, counts] : codes) {
    if (counts.size() < 2) continue;
    std::vector<std::string> each;
    for (const auto& [code, n] : counts) each.push_back(code + ": " + counted(n, "entry", "entries"));
    lines.push_back(fmt::format("device {} ({}): {} entries measured on {} different builds of the plugin ({}); each "
                                "entry keeps its own validators, so a machine uses only those of its own {} plugin "
                                "and reports the others stale (`arbiter table prune` there removes them)",
                                where.first, table.devices().at(where.first).name, where.second, counts.size(),
                                fmt::join(each, "; "), where.second));
  }
  return lines;
}

int merge(const Arguments& args) {
  if (args.positional.size() < 3) fail(ARB_ERR_INVALID_ARGUMENT, "table merge needs OUT and at least one IN table");
  const std::string out = args.positional[1];
  for (size_t i = 2; i < args.positional.size(); ++i) {
    const TuningTable in = load_table_file(args.positional[i]);
    MergeReport report;
    update_table_file(out, [&](TuningTable& table) { report = merge_tables(table, in); });
    fmt::print("{}: {} added, {} replaced, {} kept\n", args.positional[i], report.added, report.replaced, report.kept);
    for (const std::string& line : report.lines) fmt::print("  {}\n", line);
  }
  for (const std::string& line : mixed_code(load_table_file(out))) fmt::print("note: {}\n", line);
  return 0;
}

int prune(const Arguments& args, Context& context) {
  const std::string path = table_path(args, context, 1);
  std::vector<std::string> removed;
  update_table_file(path, [&](TuningTable& table) {
    const TuningTable snapshot = table;
    table.remove_if([&](const TableEntry& e) {
      const std::string status = status_here(context, snapshot, e);
      // Entries of plugins this config does not load are kept: they may be valid elsewhere.
      if (status.rfind("stale", 0) != 0 || context.registry().find(e.kernel) == nullptr) return false;
      removed.push_back(e.key + " (" + e.kernel + "): " + status);
      return true;
    });
  });
  for (const std::string& line : removed) fmt::print("removed {}\n", line);
  fmt::print("{} stale entries removed from {}; entries of other devices and of plugins not loaded here kept\n",
             removed.size(), path);
  return 0;
}

}  // namespace

int command_table(const Arguments& args) {
  const std::string sub = args.positional.empty() ? "" : args.positional[0];
  if (sub == "diff") return diff(args);
  if (sub == "merge") return merge(args);
  const auto context = make_context(args);
  if (sub == "show") return show(args, *context);
  if (sub == "prune") return prune(args, *context);
  fail(ARB_ERR_INVALID_ARGUMENT, "table needs one of: show [PATH], diff A B, merge OUT IN..., prune [PATH]");
}

}  // namespace arbiter::cli
