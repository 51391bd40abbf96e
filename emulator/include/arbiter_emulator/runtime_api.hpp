// The emulator's host side: what the CUDA runtime calls of the stand-in cuda_runtime.h do
// (libarbiter_emu, emulator/runtime/). Memory is host memory (each allocation its own,
// exactly sized, so AddressSanitizer sees every overrun); streams run their work in order
// and at once; graphs record launches and replay them; events read a steady clock (emulated
// times are never GPU times).
#pragma once

#include "device_api.hpp"

#include <cstddef>
#include <cstdint>
#include <tuple>
#include <utility>

// Exported by libarbiter_emu: a plugin whose dependencies resolve it is an emulated build
// (the host looks it up through the plugin's own handle, core/plugin/plugin_loader.cpp).
extern "C" ARBITER_EMU_API const int arbiter_emulator_build;

namespace arbiter::emu {

// The status codes, with the CUDA runtime's values.
enum Status : int {
  kSuccess = 0,
  kErrorInvalidValue = 1,
  kErrorMemoryAllocation = 2,
  kErrorInitializationError = 3,
  kErrorInvalidConfiguration = 9,
  kErrorInvalidDevicePointer = 17,
  kErrorInvalidMemcpyDirection = 21,
  kErrorInsufficientDriver = 35,
  kErrorInvalidDeviceFunction = 98,
  kErrorNoDevice = 100,
  kErrorInvalidDevice = 101,
  kErrorInvalidResourceHandle = 400,
  kErrorIllegalState = 401,
  kErrorNotReady = 600,
  kErrorIllegalAddress = 700,
  kErrorLaunchOutOfResources = 701,
  kErrorLaunchTimeout = 702,
  kErrorAssert = 710,
  kErrorIllegalInstruction = 715,
  kErrorMisalignedAddress = 716,
  kErrorLaunchFailure = 719,
  kErrorNotPermitted = 800,
  kErrorNotSupported = 801,
  kErrorStreamCaptureUnsupported = 900,
  kErrorStreamCaptureInvalidated = 901,
  kErrorStreamCaptureUnmatched = 903,
  kErrorStreamCaptureUnjoined = 904,
  kErrorStreamCaptureIsolation = 905,
  kErrorStreamCaptureImplicit = 906,
  kErrorCapturedEvent = 907,
  kErrorUnknown = 999,
};

// The emulated device (cudaGetDeviceProperties): an sm_90a GPU with few SMs, so that
// persistent grids take several tiles per block even on small problems.
struct DeviceDescription {
  const char* name;
  int major, minor, multiprocessors, warp_size, max_threads_per_block;
  size_t shared_per_block, shared_per_block_optin, shared_per_multiprocessor, global_memory, l2_bytes;
  int registers_per_block, registers_per_multiprocessor, max_threads_per_multiprocessor, clock_khz;
};
ARBITER_EMU_API const DeviceDescription& device_description();

// The order in which ready threads of a cluster run, each until it blocks: in thread order;
// in reverse; one warp (chosen by the seed) first, then the others; or a seeded random order,
// drawn again every round. By default launches take the four in turn (ARBITER_EMU_SCHEDULE
// = lockstep, reverse, warp-ahead or random fixes one), so that a race one order hides,
// another shows.
enum class ScheduleKind { lockstep, reverse, warp_ahead, random };
struct Schedule {
  ScheduleKind kind = ScheduleKind::lockstep;
  uint64_t seed = 0;
};
// Every later launch of the process uses *schedule (a test's choice); nullptr: the default.
ARBITER_EMU_API void force_schedule(const Schedule* schedule);
// The report of the calling thread's latest failed launch ("" after a successful one).
ARBITER_EMU_API const char* last_launch_report();

// The last error of the calling thread (cudaGetLastError clears it, cudaPeekAtLastError not).
ARBITER_EMU_API Status last_error(bool clear);
ARBITER_EMU_API Status set_error(Status status);  // records and returns it
// The message of a status; for the latest launch failure of this thread, the emulator's
// report (which check failed, where, for which threads).
ARBITER_EMU_API const char* status_string(Status status);
ARBITER_EMU_API const char* status_name(Status status);

ARBITER_EMU_API Status device_malloc(void** pointer, size_t bytes);
ARBITER_EMU_API Status device_free(void* pointer);
ARBITER_EMU_API bool is_device_pointer(const void* pointer, size_t bytes);

struct Stream;  // cudaStream_t
struct Event;   // cudaEvent_t
struct Graph;   // cudaGraph_t and cudaGraphExec_t
ARBITER_EMU_API Status stream_create(Stream** stream);
ARBITER_EMU_API Status stream_destroy(Stream* stream);
ARBITER_EMU_API Status stream_synchronize(Stream* stream);
ARBITER_EMU_API Status device_synchronize();
// mode: 0 global, 1 thread-local, 2 relaxed (cudaStreamCaptureMode)
ARBITER_EMU_API Status stream_begin_capture(Stream* stream, int mode);
ARBITER_EMU_API Status stream_end_capture(Stream* stream, Graph** graph);
ARBITER_EMU_API Status stream_is_capturing(Stream* stream, int* status);  // 0 none, 1 active, 2 invalidated
ARBITER_EMU_API Status graph_instantiate(Graph** exec, Graph* graph);
ARBITER_EMU_API Status graph_launch(Graph* exec, Stream* stream);
ARBITER_EMU_API Status graph_destroy(Graph* graph);
ARBITER_EMU_API size_t graph_node_count(Graph* graph);
ARBITER_EMU_API Status event_create(Event** event);
ARBITER_EMU_API Status event_destroy(Event* event);
ARBITER_EMU_API Status event_record(Event* event, Stream* stream);
ARBITER_EMU_API Status event_synchronize(Event* event);
ARBITER_EMU_API Status event_elapsed_ms(float* ms, Event* start, Event* stop);

// kind: 0 host-to-host, 1 host-to-device, 2 device-to-host, 3 device-to-device, 4 default
ARBITER_EMU_API Status memcpy_async(void* dst, const void* src, size_t bytes, int kind, Stream* stream);
ARBITER_EMU_API Status memset_async(void* dst, int value, size_t bytes, Stream* stream);

// ---- kernels ------------------------------------------------------------------------------------

// What cudaFuncGetAttributes reports and cudaFuncSetAttribute changes, per kernel.
struct KernelInfo {
  KernelAttributes declared;           // __launch_bounds__, __cluster_dims__
  int max_dynamic_shared = 48 * 1024;  // cudaFuncAttributeMaxDynamicSharedMemorySize
  int registers = 0;                   // what ptxas would give at most under the launch bounds
  int max_threads = 1024;
};
// The kernel's attributes; the first time, from a dry start of one thread (kernel_entry
// runs first in every kernel body) through `probe`.
using KernelProbe = void (*)(const void* kernel);
ARBITER_EMU_API Status kernel_info(const void* kernel, KernelProbe probe, KernelInfo* info);
ARBITER_EMU_API Status set_max_dynamic_shared(const void* kernel, KernelProbe probe, int bytes);

// A launch: `run` calls the kernel with the arguments at `arguments` (one thread's call;
// every thread makes its own).
struct LaunchConfig {
  dim3 grid, block;
  size_t dynamic_shared = 0;
  Stream* stream = nullptr;
  dim3 cluster{0, 0, 0};  // from cudaLaunchAttributeClusterDimension; 0: the kernel's own
};
using KernelThunk = void (*)(const void* kernel, void* arguments);
using ArgumentsCopy = void* (*)(const void* arguments);  // a heap copy, for graphs
using ArgumentsFree = void (*)(void* arguments);
ARBITER_EMU_API Status launch(const void* kernel, KernelProbe probe, const LaunchConfig& config, KernelThunk run,
                              void* arguments, ArgumentsCopy copy, ArgumentsFree free);

// How many clusters of `config` fit at once (cudaOccupancyMaxActiveClusters).
ARBITER_EMU_API Status max_active_clusters(const void* kernel, KernelProbe probe, const LaunchConfig& config,
                                           int* clusters);

// cuTensorMapEncodeTiled and the other driver functions the kernels look up by name.
ARBITER_EMU_API void* driver_entry_point(const char* symbol);

// The typed layer the stand-in headers use: the kernel's own parameter types travel in a
// tuple, and each emulated thread calls the kernel with a copy.
template <typename... Params>
struct TypedKernel {
  using Function = void (*)(Params...);
  using Arguments = std::tuple<std::decay_t<Params>...>;
  static void run(const void* kernel, void* arguments) {
    std::apply(reinterpret_cast<Function>(const_cast<void*>(kernel)), *static_cast<const Arguments*>(arguments));
  }
  // A dry start: default arguments; kernel_entry stops the thread before the body runs.
  static void probe(const void* kernel) {
    Arguments arguments{};
    run(kernel, &arguments);
  }
  static void* copy(const void* arguments) { return new Arguments(*static_cast<const Arguments*>(arguments)); }
  static void free(void* arguments) { delete static_cast<Arguments*>(arguments); }
};

}  // namespace arbiter::emu
