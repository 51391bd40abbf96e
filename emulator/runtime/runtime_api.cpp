// The emulated device's description, error state and memory (runtime_api.hpp).
#include "engine.hpp"
#include "fork_safe_mutex.hpp"

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>

extern "C" const int arbiter_emulator_build = 1;

namespace arbiter::emu {
namespace {

thread_local Status last = kSuccess;
thread_local std::string last_report;  // the emulator's words on this thread's latest failed launch
thread_local std::string message;      // status_string's buffer

ForkSafeMutex allocations_mutex{fork_rank::allocations};
std::map<const unsigned char*, size_t>& allocations() {
  static auto* m = new std::map<const unsigned char*, size_t>;  // outlives static destruction
  return *m;
}

}  // namespace

const DeviceDescription& device_description() {
  // An H100-like sm_90a part with 4 SMs: persistent grids (one block per SM) then take several
  // tiles per block on problems small enough to emulate, as they do on a GPU at scale.
  static const DeviceDescription d = {"arbiter SIMT emulator (sm_90a)",
                                      9,
                                      0,
                                      4,
                                      32,
                                      1024,
                                      48 * 1024,
                                      227 * 1024,
                                      228 * 1024,
                                      size_t(16) << 30,
                                      size_t(50) << 20,
                                      65536,
                                      65536,
                                      2048,
                                      1980000};
  return d;
}

Status last_error(bool clear) {
  const Status s = last;
  if (clear) last = kSuccess;
  return s;
}

Status set_error(Status status) {
  if (status != kSuccess) last = status;
  return status;
}

void set_launch_report(const std::string& report) { last_report = report; }

const char* last_launch_report() { return last_report.c_str(); }

const char* status_name(Status status) {
  switch (status) {
    case kSuccess: return "cudaSuccess";
    case kErrorInvalidValue: return "cudaErrorInvalidValue";
    case kErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case kErrorInitializationError: return "cudaErrorInitializationError";
    case kErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case kErrorInvalidDevicePointer: return "cudaErrorInvalidDevicePointer";
    case kErrorInvalidMemcpyDirection: return "cudaErrorInvalidMemcpyDirection";
    case kErrorInsufficientDriver: return "cudaErrorInsufficientDriver";
    case kErrorInvalidDeviceFunction: return "cudaErrorInvalidDeviceFunction";
    case kErrorNoDevice: return "cudaErrorNoDevice";
    case kErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case kErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
    case kErrorIllegalState: return "cudaErrorIllegalState";
    case kErrorNotReady: return "cudaErrorNotReady";
    case kErrorIllegalAddress: return "cudaErrorIllegalAddress";
    case kErrorLaunchOutOfResources: return "cudaErrorLaunchOutOfResources";
    case kErrorLaunchTimeout: return "cudaErrorLaunchTimeout";
    case kErrorAssert: return "cudaErrorAssert";
    case kErrorIllegalInstruction: return "cudaErrorIllegalInstruction";
    case kErrorMisalignedAddress: return "cudaErrorMisalignedAddress";
    case kErrorLaunchFailure: return "cudaErrorLaunchFailure";
    case kErrorNotPermitted: return "cudaErrorNotPermitted";
    case kErrorNotSupported: return "cudaErrorNotSupported";
    case kErrorStreamCaptureUnsupported: return "cudaErrorStreamCaptureUnsupported";
    case kErrorStreamCaptureInvalidated: return "cudaErrorStreamCaptureInvalidated";
    case kErrorStreamCaptureUnmatched: return "cudaErrorStreamCaptureUnmatched";
    case kErrorStreamCaptureUnjoined: return "cudaErrorStreamCaptureUnjoined";
    case kErrorStreamCaptureIsolation: return "cudaErrorStreamCaptureIsolation";
    case kErrorStreamCaptureImplicit: return "cudaErrorStreamCaptureImplicit";
    case kErrorCapturedEvent: return "cudaErrorCapturedEvent";
    default: return "cudaErrorUnknown";
  }
}

const char* status_string(Status status) {
  const char* base = nullptr;
  switch (status) {
    case kSuccess: return "no error";
    case kErrorInvalidValue: return "invalid argument";
    case kErrorMemoryAllocation: return "out of memory";
    case kErrorInvalidConfiguration: return "invalid configuration argument";
    case kErrorInvalidDevicePointer: return "invalid device pointer";
    case kErrorInvalidDeviceFunction: return "invalid device function";
    case kErrorInvalidDevice: return "invalid device ordinal";
    case kErrorInvalidResourceHandle: return "invalid resource handle";
    case kErrorNotSupported: return "operation not supported";
    case kErrorNotReady: return "device not ready";
    case kErrorStreamCaptureUnsupported: return "operation not permitted when stream is capturing";
    case kErrorStreamCaptureInvalidated: return "operation failed due to a previous error during capture";
    case kErrorStreamCaptureUnmatched: return "capture was not initiated in this stream";
    case kErrorIllegalAddress: base = "an illegal memory access was encountered"; break;
    case kErrorLaunchOutOfResources: base = "too many resources requested for launch"; break;
    case kErrorLaunchTimeout: base = "the launch timed out and was terminated"; break;
    case kErrorAssert: base = "device-side assert triggered"; break;
    case kErrorIllegalInstruction: base = "an illegal instruction was encountered"; break;
    case kErrorMisalignedAddress: base = "misaligned address"; break;
    case kErrorLaunchFailure: base = "unspecified launch failure"; break;
    default: return status_name(status);
  }
  // A launch failure says what the emulator found, where, for whom.
  message = std::string(base) + (last_report.empty() ? "" : " (emulator: " + last_report + ")");
  return message.c_str();
}

Status device_malloc(void** pointer, size_t bytes) {
  if (pointer == nullptr) return set_error(kErrorInvalidValue);
  // Exactly `bytes` (256-aligned, as cudaMalloc's): AddressSanitizer reports a kernel's first
  // byte past the end at the kernel's line.
  void* p = nullptr;
  if (posix_memalign(&p, 256, bytes > 0 ? bytes : 1) != 0) {
    *pointer = nullptr;
    return set_error(kErrorMemoryAllocation);
  }
  std::lock_guard<ForkSafeMutex> lock(allocations_mutex);
  allocations()[static_cast<unsigned char*>(p)] = bytes;
  *pointer = p;
  return kSuccess;
}

Status device_free(void* pointer) {
  if (pointer == nullptr) return kSuccess;
  std::lock_guard<ForkSafeMutex> lock(allocations_mutex);
  auto it = allocations().find(static_cast<unsigned char*>(pointer));
  if (it == allocations().end()) return set_error(kErrorInvalidDevicePointer);
  allocations().erase(it);
  std::free(pointer);
  return kSuccess;
}

bool is_device_pointer(const void* pointer, size_t bytes) {
  const unsigned char* p = static_cast<const unsigned char*>(pointer);
  std::lock_guard<ForkSafeMutex> lock(allocations_mutex);
  auto it = allocations().upper_bound(p);
  if (it == allocations().begin()) return false;
  --it;
  return p >= it->first && p + bytes <= it->first + it->second;
}

}  // namespace arbiter::emu
