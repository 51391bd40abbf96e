// Version negotiation: with a plugin of an older minor, a newer minor and another major;
// and the plugin side (plugin.hpp) facing hosts of other versions.
#include "plugin/abi_negotiation.hpp"
#include "problem/op_table.hpp"
#include "plugin/host_services.hpp"
#include "plugin/plugin_loader.hpp"
#include "test_support.hpp"

#include <arbiter/plugin.h>
#include <doctest/doctest.h>
#include <dlfcn.h>

#include <cmath>

using namespace arbiter;

TEST_CASE("negotiation rule: equal major required, minors may differ") {
  CHECK_FALSE(abi_incompatibility({1, 3}, {1, 2}).has_value());  // older plugin minor
  CHECK_FALSE(abi_incompatibility({1, 2}, {1, 3}).has_value());  // newer plugin minor
  CHECK(agreed_minor({1, 3}, {1, 2}) == 2);
  CHECK(agreed_minor({1, 2}, {1, 3}) == 2);
  const auto newer_major = abi_incompatibility({1, 0}, {2, 0});
  REQUIRE(newer_major.has_value());
  CHECK(newer_major->find("2.0") != std::string::npos);
  CHECK(newer_major->find("1.0") != std::string::npos);
  CHECK(abi_incompatibility({2, 0}, {1, 5}).has_value());
}

TEST_CASE("a plugin of a newer minor, with longer structs, is accepted and its extra fields ignored") {
  const auto record = load_plugin(test::fixture_file("newer_minor"));
  REQUIRE_MESSAGE(record->state == PluginState::loaded, record->reason);
  CHECK(record->abi_minor == ARB_PLUGIN_ABI_MINOR + 1);
  CHECK(record->agreed_minor == ARB_PLUGIN_ABI_MINOR);  // what this host knows
  CHECK(record->description == "from the future");
  CHECK(record->runtime_version == "vendor 9.9");
  REQUIRE(record->kernels.size() == 1);
  CHECK(record->kernels[0].abi.struct_size == sizeof(arb_kernel));  // widened copy in the host's layout
  CHECK(record->kernels[0].name == "newer_minor.softmax");
}

TEST_CASE("the newer-minor plugin's kernel runs through the host, and release() runs at unload") {
  // Keep our own handle so the counter can be read after the context unloads its copy.
  void* handle = dlopen(test::fixture_file("newer_minor").c_str(), RTLD_NOW | RTLD_LOCAL);
  REQUIRE(handle != nullptr);
  auto release_count = reinterpret_cast<int (*)()>(dlsym(handle, "newer_minor_release_count"));
  REQUIRE(static_cast<bool>(release_count));
  const int before = release_count();
  {
    // The fixture's kernel is not exact enough for the gate: trust it by path and hash.
    auto context = test::make_context(test::config_loading({test::fixture_file("newer_minor")},
                                                           test::trusting({test::fixture_file("newer_minor")})));
    Call call;
    float x[3] = {1.0f, 2.0f, 3.0f}, y[3] = {0, 0, 0};
    test::Tensor tx(x, {1, 3}), ty(y, {1, 3});
    arb_softmax_args args = ARB_SOFTMAX_ARGS_INIT;
    args.x = &tx.t;
    args.y = &ty.t;
    build_call(ARB_OP_SOFTMAX, &args, call);
    context->run(call.problem, call.operands, nullptr);  // through dispatch
    const float sum = std::exp(-2.0f) + std::exp(-1.0f) + 1.0f;
    CHECK(y[2] == doctest::Approx(1.0f / sum));
    CHECK(y[0] == doctest::Approx(std::exp(-2.0f) / sum));
    CHECK(release_count() == before);
  }
  CHECK(release_count() == before + 1);
  dlclose(handle);
}

TEST_CASE("a plugin with the oldest accepted layout is read without touching absent fields") {
  const auto record = load_plugin(test::fixture_file("older_minor"));
  REQUIRE_MESSAGE(record->state == PluginState::loaded, record->reason);
  CHECK(record->abi_minor == 0);
  CHECK(record->description.empty());  // the garbage past struct_size was not read
  CHECK(record->runtime_version.empty());
  CHECK(record->kernels.size() == 1);
}

TEST_CASE("a plugin declaring another major version is rejected with both versions named") {
  const auto record = load_plugin(test::fixture_file("wrong_major"));
  CHECK(record->state == PluginState::rejected);
  CHECK(record->reason.find("incompatible") != std::string::npos);
  CHECK(record->reason.find(std::to_string(ARB_PLUGIN_ABI_MAJOR + 1) + ".0") != std::string::npos);
  CHECK(record->kernels.empty());
}

TEST_CASE("a descriptor shorter than the oldest layout is rejected") {
  const auto record = load_plugin(test::fixture_file("too_small"));
  CHECK(record->state == PluginState::rejected);
  CHECK(record->reason.find("struct_size") != std::string::npos);
}

namespace {
// Calls a real plugin's entry with a host API of our choosing.
arb_status call_entry(const std::string& file, const arb_host_api& host, std::string& message,
                      const arb_plugin_descriptor** out) {
  void* handle = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
  REQUIRE(handle != nullptr);
  auto entry = reinterpret_cast<arb_plugin_entry_fn>(dlsym(handle, ARB_PLUGIN_ENTRY_SYMBOL));
  REQUIRE(static_cast<bool>(entry));
  char buffer[256] = {0};
  const arb_status status = entry(&host, out, buffer, sizeof buffer);
  message = buffer;
  // The handle stays open: *out points into the library.
  return status;
}
}  // namespace

TEST_CASE("plugin side: a host of another major is refused with a reason") {
  static arb_host_api host;  // plugins may keep the pointer: it must outlive them
  host = *host_services();
  host.abi_major = ARB_PLUGIN_ABI_MAJOR + 1;
  std::string message;
  const arb_plugin_descriptor* descriptor = nullptr;
  CHECK(call_entry(test::plugin_file("cpu"), host, message, &descriptor) == ARB_ERR_VERSION);
  CHECK(message.find("host offers " + std::to_string(ARB_PLUGIN_ABI_MAJOR + 1)) != std::string::npos);
}

TEST_CASE("plugin side: an older host whose API struct lacks the log function is served") {
  static arb_host_api host;  // plugins may keep the pointer: it must outlive them
  host = *host_services();
  host.struct_size = offsetof(arb_host_api, log);  // an older minor that had no logging
  host.log = reinterpret_cast<decltype(host.log)>(0x1);  // must never be called
  std::string message;
  const arb_plugin_descriptor* descriptor = nullptr;
  REQUIRE(call_entry(test::plugin_file("cpu"), host, message, &descriptor) == ARB_OK);
  REQUIRE(descriptor != nullptr);
  CHECK(std::string(descriptor->name) == "cpu");
  CHECK(descriptor->abi_major == ARB_PLUGIN_ABI_MAJOR);
}

TEST_CASE("plugin side: a host struct too small to carry a version is refused") {
  static arb_host_api host;  // plugins may keep the pointer: it must outlive them
  host = *host_services();
  host.struct_size = sizeof(size_t);
  std::string message;
  const arb_plugin_descriptor* descriptor = nullptr;
  CHECK(call_entry(test::plugin_file("cpu"), host, message, &descriptor) == ARB_ERR_VERSION);
}
