// Stand-in for the CUDA runtime's header in emulated builds (emucc puts emulator/include
// first on the include path): the types, constants and calls arbiter's CUDA sources use,
// forwarding to the SIMT emulator (arbiter_emulator/runtime_api.hpp). Everything lives in
// namespace arbiter_emulated_cuda, made visible by a using-directive, so that a binary can
// hold emulated and real CUDA code side by side without two definitions of one name.
#pragma once

#include "arbiter_emulator/device_api.hpp"
#include "arbiter_emulator/runtime_api.hpp"
#include "vector_types.h"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#define ARBITER_EMULATOR_RUNTIME 1  // this is the emulator's runtime header, not NVIDIA's
#define CUDART_VERSION 13000
#define cudaStreamNonBlocking 0x01u
#define cudaStreamDefault 0x00u
#define cudaEventDefault 0x00u
#define cudaEventDisableTiming 0x02u

namespace arbiter_emulated_cuda {

enum cudaError_t : int {
  cudaSuccess = arbiter::emu::kSuccess,
  cudaErrorInvalidValue = arbiter::emu::kErrorInvalidValue,
  cudaErrorMemoryAllocation = arbiter::emu::kErrorMemoryAllocation,
  cudaErrorInitializationError = arbiter::emu::kErrorInitializationError,
  cudaErrorInvalidConfiguration = arbiter::emu::kErrorInvalidConfiguration,
  cudaErrorInvalidDevicePointer = arbiter::emu::kErrorInvalidDevicePointer,
  cudaErrorInvalidMemcpyDirection = arbiter::emu::kErrorInvalidMemcpyDirection,
  cudaErrorInsufficientDriver = arbiter::emu::kErrorInsufficientDriver,
  cudaErrorInvalidDeviceFunction = arbiter::emu::kErrorInvalidDeviceFunction,
  cudaErrorNoDevice = arbiter::emu::kErrorNoDevice,
  cudaErrorInvalidDevice = arbiter::emu::kErrorInvalidDevice,
  cudaErrorInvalidResourceHandle = arbiter::emu::kErrorInvalidResourceHandle,
  cudaErrorIllegalState = arbiter::emu::kErrorIllegalState,
  cudaErrorNotReady = arbiter::emu::kErrorNotReady,
  cudaErrorIllegalAddress = arbiter::emu::kErrorIllegalAddress,
  cudaErrorLaunchOutOfResources = arbiter::emu::kErrorLaunchOutOfResources,
  cudaErrorLaunchTimeout = arbiter::emu::kErrorLaunchTimeout,
  cudaErrorAssert = arbiter::emu::kErrorAssert,
  cudaErrorIllegalInstruction = arbiter::emu::kErrorIllegalInstruction,
  cudaErrorMisalignedAddress = arbiter::emu::kErrorMisalignedAddress,
  cudaErrorLaunchFailure = arbiter::emu::kErrorLaunchFailure,
  cudaErrorNotPermitted = arbiter::emu::kErrorNotPermitted,
  cudaErrorNotSupported = arbiter::emu::kErrorNotSupported,
  cudaErrorStreamCaptureUnsupported = arbiter::emu::kErrorStreamCaptureUnsupported,
  cudaErrorStreamCaptureInvalidated = arbiter::emu::kErrorStreamCaptureInvalidated,
  cudaErrorStreamCaptureUnmatched = arbiter::emu::kErrorStreamCaptureUnmatched,
  cudaErrorStreamCaptureUnjoined = arbiter::emu::kErrorStreamCaptureUnjoined,
  cudaErrorStreamCaptureIsolation = arbiter::emu::kErrorStreamCaptureIsolation,
  cudaErrorStreamCaptureImplicit = arbiter::emu::kErrorStreamCaptureImplicit,
  cudaErrorCapturedEvent = arbiter::emu::kErrorCapturedEvent,
  cudaErrorUnknown = arbiter::emu::kErrorUnknown,
};
using cudaError = cudaError_t;

using cudaStream_t = arbiter::emu::Stream*;
using cudaEvent_t = arbiter::emu::Event*;
using cudaGraph_t = arbiter::emu::Graph*;
using cudaGraphExec_t = arbiter::emu::Graph*;
struct CUgraphNode_st;
using cudaGraphNode_t = CUgraphNode_st*;

enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4
};
enum cudaStreamCaptureMode {
  cudaStreamCaptureModeGlobal = 0,
  cudaStreamCaptureModeThreadLocal = 1,
  cudaStreamCaptureModeRelaxed = 2
};
enum cudaStreamCaptureStatus {
  cudaStreamCaptureStatusNone = 0,
  cudaStreamCaptureStatusActive = 1,
  cudaStreamCaptureStatusInvalidated = 2
};
enum cudaFuncAttribute {
  cudaFuncAttributeMaxDynamicSharedMemorySize = 8,
  cudaFuncAttributePreferredSharedMemoryCarveout = 9,
  cudaFuncAttributeNonPortableClusterSizeAllowed = 12,
};
enum cudaDeviceAttr {
  cudaDevAttrMaxThreadsPerBlock = 1,
  cudaDevAttrMaxSharedMemoryPerBlock = 8,
  cudaDevAttrWarpSize = 10,
  cudaDevAttrClockRate = 13,
  cudaDevAttrMultiProcessorCount = 16,
  cudaDevAttrComputeCapabilityMajor = 75,
  cudaDevAttrComputeCapabilityMinor = 76,
  cudaDevAttrMaxSharedMemoryPerBlockOptin = 97,
  cudaDevAttrL2CacheSize = 38,
};
enum cudaDriverEntryPointQueryResult {
  cudaDriverEntryPointSuccess = 0,
  cudaDriverEntryPointSymbolNotFound = 1,
  cudaDriverEntryPointVersionNotSufficent = 2
};
enum cudaGetDriverEntryPointFlags { cudaEnableDefault = 0, cudaEnableLegacyStream = 1, cudaEnablePerThreadDefaultStream = 2 };

struct cudaDeviceProp {
  char name[256];
  size_t totalGlobalMem, sharedMemPerBlock, sharedMemPerBlockOptin, sharedMemPerMultiprocessor;
  int regsPerBlock, regsPerMultiprocessor, warpSize, maxThreadsPerBlock, maxThreadsPerMultiProcessor;
  int maxThreadsDim[3], maxGridSize[3];
  int clockRate, major, minor, multiProcessorCount, l2CacheSize, concurrentKernels, integrated;
};

struct cudaFuncAttributes {
  size_t sharedSizeBytes, constSizeBytes, localSizeBytes;
  int maxThreadsPerBlock, numRegs, ptxVersion, binaryVersion, cacheModeCA, maxDynamicSharedSizeBytes;
  int preferredShmemCarveout, clusterDimMustBeSet, requiredClusterWidth, requiredClusterHeight, requiredClusterDepth;
  int clusterSchedulingPolicyPreference, nonPortableClusterSizeAllowed;
};

enum cudaLaunchAttributeID {
  cudaLaunchAttributeIgnore = 0,
  cudaLaunchAttributeClusterDimension = 4,
};
struct cudaLaunchAttributeValue {
  struct {
    unsigned int x, y, z;
  } clusterDim;
};
struct cudaLaunchAttribute {
  cudaLaunchAttributeID id;
  cudaLaunchAttributeValue val;
};
struct cudaLaunchConfig_t {
  dim3 gridDim, blockDim;
  size_t dynamicSmemBytes;
  cudaStream_t stream;
  cudaLaunchAttribute* attrs;
  unsigned int numAttrs;
};

// ---- errors, device --------------------------------------------------------------------------

inline cudaError_t as_error(arbiter::emu::Status s) { return static_cast<cudaError_t>(s); }
inline cudaError_t cudaGetLastError() { return as_error(arbiter::emu::last_error(true)); }
inline cudaError_t cudaPeekAtLastError() { return as_error(arbiter::emu::last_error(false)); }
inline const char* cudaGetErrorString(cudaError_t e) { return arbiter::emu::status_string(static_cast<arbiter::emu::Status>(e)); }
inline const char* cudaGetErrorName(cudaError_t e) { return arbiter::emu::status_name(static_cast<arbiter::emu::Status>(e)); }

inline cudaError_t cudaGetDeviceCount(int* count) {
  if (count == nullptr) return as_error(arbiter::emu::set_error(arbiter::emu::kErrorInvalidValue));
  *count = 1;
  return cudaSuccess;
}
inline cudaError_t cudaSetDevice(int device) {
  return device == 0 ? cudaSuccess : as_error(arbiter::emu::set_error(arbiter::emu::kErrorInvalidDevice));
}
inline cudaError_t cudaGetDevice(int* device) {
  *device = 0;
  return cudaSuccess;
}
inline cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  if (prop == nullptr || device != 0) return as_error(arbiter::emu::set_error(arbiter::emu::kErrorInvalidDevice));
  const arbiter::emu::DeviceDescription& d = arbiter::emu::device_description();
  std::memset(prop, 0, sizeof *prop);
  std::strncpy(prop->name, d.name, sizeof prop->name - 1);
  prop->totalGlobalMem = d.global_memory;
  prop->sharedMemPerBlock = d.shared_per_block;
  prop->sharedMemPerBlockOptin = d.shared_per_block_optin;
  prop->sharedMemPerMultiprocessor = d.shared_per_multiprocessor;
  prop->regsPerBlock = d.registers_per_block;
  prop->regsPerMultiprocessor = d.registers_per_multiprocessor;
  prop->warpSize = d.warp_size;
  prop->maxThreadsPerBlock = d.max_threads_per_block;
  prop->maxThreadsPerMultiProcessor = d.max_threads_per_multiprocessor;
  prop->maxThreadsDim[0] = 1024;
  prop->maxThreadsDim[1] = 1024;
  prop->maxThreadsDim[2] = 64;
  prop->maxGridSize[0] = 0x7fffffff;
  prop->maxGridSize[1] = 65535;
  prop->maxGridSize[2] = 65535;
  prop->clockRate = d.clock_khz;
  prop->major = d.major;
  prop->minor = d.minor;
  prop->multiProcessorCount = d.multiprocessors;
  prop->l2CacheSize = static_cast<int>(d.l2_bytes);
  prop->concurrentKernels = 1;
  return cudaSuccess;
}
inline cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attribute, int device) {
  cudaDeviceProp p;
  if (const cudaError_t e = cudaGetDeviceProperties(&p, device); e != cudaSuccess) return e;
  switch (attribute) {
    case cudaDevAttrMaxThreadsPerBlock: *value = p.maxThreadsPerBlock; break;
    case cudaDevAttrMaxSharedMemoryPerBlock: *value = static_cast<int>(p.sharedMemPerBlock); break;
    case cudaDevAttrWarpSize: *value = p.warpSize; break;
    case cudaDevAttrClockRate: *value = p.clockRate; break;
    case cudaDevAttrMultiProcessorCount: *value = p.multiProcessorCount; break;
    case cudaDevAttrComputeCapabilityMajor: *value = p.major; break;
    case cudaDevAttrComputeCapabilityMinor: *value = p.minor; break;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: *value = static_cast<int>(p.sharedMemPerBlockOptin); break;
    case cudaDevAttrL2CacheSize: *value = p.l2CacheSize; break;
    default: return as_error(arbiter::emu::set_error(arbiter::emu::kErrorInvalidValue));
  }
  return cudaSuccess;
}
inline cudaError_t cudaDriverGetVersion(int* version) {
  *version = 13000;
  return cudaSuccess;
}
inline cudaError_t cudaRuntimeGetVersion(int* version) {
  *version = CUDART_VERSION;
  return cudaSuccess;
}
inline cudaError_t cudaDeviceSynchronize() { return as_error(arbiter::emu::device_synchronize()); }

// ---- memory ------------------------------------------------------------------------------------

inline cudaError_t cudaMalloc(void** pointer, size_t bytes) { return as_error(arbiter::emu::device_malloc(pointer, bytes)); }
template <typename T>
cudaError_t cudaMalloc(T** pointer, size_t bytes) {
  return cudaMalloc(reinterpret_cast<void**>(pointer), bytes);
}
inline cudaError_t cudaFree(void* pointer) { return as_error(arbiter::emu::device_free(pointer)); }
inline cudaError_t cudaMallocHost(void** pointer, size_t bytes) {
  *pointer = ::operator new(bytes);
  return cudaSuccess;
}
inline cudaError_t cudaFreeHost(void* pointer) {
  ::operator delete(pointer);
  return cudaSuccess;
}
inline cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t stream = nullptr) {
  return as_error(arbiter::emu::memcpy_async(dst, src, bytes, kind, stream));
}
inline cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  const cudaError_t e = cudaMemcpyAsync(dst, src, bytes, kind, nullptr);
  return e != cudaSuccess ? e : cudaDeviceSynchronize();
}
inline cudaError_t cudaMemsetAsync(void* dst, int value, size_t bytes, cudaStream_t stream = nullptr) {
  return as_error(arbiter::emu::memset_async(dst, value, bytes, stream));
}
inline cudaError_t cudaMemset(void* dst, int value, size_t bytes) {
  const cudaError_t e = cudaMemsetAsync(dst, value, bytes, nullptr);
  return e != cudaSuccess ? e : cudaDeviceSynchronize();
}

// ---- streams, events, graphs -------------------------------------------------------------------------

inline cudaError_t cudaStreamCreate(cudaStream_t* stream) { return as_error(arbiter::emu::stream_create(stream)); }
inline cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int) { return cudaStreamCreate(stream); }
inline cudaError_t cudaStreamDestroy(cudaStream_t stream) { return as_error(arbiter::emu::stream_destroy(stream)); }
inline cudaError_t cudaStreamSynchronize(cudaStream_t stream) { return as_error(arbiter::emu::stream_synchronize(stream)); }
inline cudaError_t cudaStreamQuery(cudaStream_t stream) { return as_error(arbiter::emu::stream_synchronize(stream)); }
inline cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode) {
  return as_error(arbiter::emu::stream_begin_capture(stream, mode));
}
inline cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph) {
  return as_error(arbiter::emu::stream_end_capture(stream, graph));
}
inline cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus* status) {
  int s = 0;
  const cudaError_t e = as_error(arbiter::emu::stream_is_capturing(stream, &s));
  *status = static_cast<cudaStreamCaptureStatus>(s);
  return e;
}
inline cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long = 0) {
  return as_error(arbiter::emu::graph_instantiate(exec, graph));
}
inline cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
  return as_error(arbiter::emu::graph_launch(exec, stream));
}
inline cudaError_t cudaGraphDestroy(cudaGraph_t graph) { return as_error(arbiter::emu::graph_destroy(graph)); }
inline cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) { return as_error(arbiter::emu::graph_destroy(exec)); }
inline cudaError_t cudaGraphGetNodes(cudaGraph_t graph, cudaGraphNode_t* nodes, size_t* count) {
  if (count == nullptr) return as_error(arbiter::emu::set_error(arbiter::emu::kErrorInvalidValue));
  if (nodes != nullptr) return as_error(arbiter::emu::set_error(arbiter::emu::kErrorNotSupported));
  *count = arbiter::emu::graph_node_count(graph);
  return cudaSuccess;
}
inline cudaError_t cudaEventCreate(cudaEvent_t* event) { return as_error(arbiter::emu::event_create(event)); }
inline cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int) { return cudaEventCreate(event); }
inline cudaError_t cudaEventDestroy(cudaEvent_t event) { return as_error(arbiter::emu::event_destroy(event)); }
inline cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream = nullptr) {
  return as_error(arbiter::emu::event_record(event, stream));
}
inline cudaError_t cudaEventSynchronize(cudaEvent_t event) { return as_error(arbiter::emu::event_synchronize(event)); }
inline cudaError_t cudaEventQuery(cudaEvent_t event) { return as_error(arbiter::emu::event_synchronize(event)); }
inline cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t stop) {
  return as_error(arbiter::emu::event_elapsed_ms(ms, start, stop));
}

// ---- kernels ----------------------------------------------------------------------------------------

template <typename... Params>
const void* kernel_address(void (*kernel)(Params...)) {
  return reinterpret_cast<const void*>(kernel);
}

template <typename... Params>
cudaError_t cudaFuncGetAttributes(cudaFuncAttributes* attributes, void (*kernel)(Params...)) {
  arbiter::emu::KernelInfo info;
  const cudaError_t e =
      as_error(arbiter::emu::kernel_info(kernel_address(kernel), &arbiter::emu::TypedKernel<Params...>::probe, &info));
  if (e != cudaSuccess) return e;
  std::memset(attributes, 0, sizeof *attributes);
  attributes->maxThreadsPerBlock = info.max_threads;
  attributes->numRegs = info.registers;
  attributes->ptxVersion = 90;
  attributes->binaryVersion = 90;
  attributes->maxDynamicSharedSizeBytes = info.max_dynamic_shared;
  attributes->requiredClusterWidth = static_cast<int>(info.declared.cluster_x);
  attributes->requiredClusterHeight = static_cast<int>(info.declared.cluster_y);
  attributes->requiredClusterDepth = static_cast<int>(info.declared.cluster_z);
  return cudaSuccess;
}

template <typename... Params>
cudaError_t cudaFuncSetAttribute(void (*kernel)(Params...), cudaFuncAttribute attribute, int value) {
  if (attribute == cudaFuncAttributeMaxDynamicSharedMemorySize)
    return as_error(
        arbiter::emu::set_max_dynamic_shared(kernel_address(kernel), &arbiter::emu::TypedKernel<Params...>::probe, value));
  if (attribute == cudaFuncAttributePreferredSharedMemoryCarveout || attribute == cudaFuncAttributeNonPortableClusterSizeAllowed)
    return cudaSuccess;  // hints without effect here
  return as_error(arbiter::emu::set_error(arbiter::emu::kErrorInvalidValue));
}

inline arbiter::emu::LaunchConfig launch_config(const cudaLaunchConfig_t& c) {
  arbiter::emu::LaunchConfig config;
  config.grid = c.gridDim;
  config.block = c.blockDim;
  config.dynamic_shared = c.dynamicSmemBytes;
  config.stream = c.stream;
  for (unsigned int i = 0; c.attrs != nullptr && i < c.numAttrs; ++i)
    if (c.attrs[i].id == cudaLaunchAttributeClusterDimension)
      config.cluster = dim3(c.attrs[i].val.clusterDim.x, c.attrs[i].val.clusterDim.y, c.attrs[i].val.clusterDim.z);
  return config;
}

// The kernel's parameters are converted from the arguments as a call would convert them.
template <typename... Params, typename... Args>
cudaError_t cudaLaunchKernelEx(const cudaLaunchConfig_t* config, void (*kernel)(Params...), Args&&... args) {
  static_assert(sizeof...(Params) == sizeof...(Args), "cudaLaunchKernelEx: wrong number of kernel arguments");
  using K = arbiter::emu::TypedKernel<Params...>;
  typename K::Arguments arguments(std::forward<Args>(args)...);
  return as_error(arbiter::emu::launch(kernel_address(kernel), &K::probe, launch_config(*config), &K::run, &arguments,
                                       &K::copy, &K::free));
}

template <typename... Params>
cudaError_t cudaOccupancyMaxActiveClusters(int* clusters, void (*kernel)(Params...), const cudaLaunchConfig_t* config) {
  return as_error(arbiter::emu::max_active_clusters(kernel_address(kernel), &arbiter::emu::TypedKernel<Params...>::probe,
                                                    launch_config(*config), clusters));
}

inline cudaError_t cudaGetDriverEntryPointByVersion(const char* symbol, void** function, unsigned int, unsigned long long,
                                                    cudaDriverEntryPointQueryResult* result = nullptr) {
  *function = arbiter::emu::driver_entry_point(symbol);
  if (result) *result = *function ? cudaDriverEntryPointSuccess : cudaDriverEntryPointSymbolNotFound;
  return *function ? cudaSuccess : as_error(arbiter::emu::set_error(arbiter::emu::kErrorNotSupported));
}
inline cudaError_t cudaGetDriverEntryPoint(const char* symbol, void** function, unsigned long long flags,
                                           cudaDriverEntryPointQueryResult* result = nullptr) {
  return cudaGetDriverEntryPointByVersion(symbol, function, 12000, flags, result);
}

}  // namespace arbiter_emulated_cuda

using namespace arbiter_emulated_cuda;  // NOLINT: the CUDA names, unqualified, as the real header has them

#include "arbiter_emulator/device_functions.hpp"
