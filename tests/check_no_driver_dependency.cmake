# Every binary and plugin must start on a machine without an NVIDIA driver: the CUDA
# runtime loads libcuda itself when a device is asked for. A DT_NEEDED on libcuda.so.1
# (for example from linking the toolkit's stub) would make the program fail to start, or
# the plugin be rejected, before arbiter can say "no CUDA device". Nor may any of them need
# cuBLASLt at load: mapping it costs about 250 ms, paid by every context on a host without a
# GPU; the cublaslt plugin opens it once a device is known (plugins/cublaslt/lt_library.hpp).
# Usage: cmake -DREADELF=... -DFILES="a;b;c" -P check_no_driver_dependency.cmake
set(offenders "")
set(heavy "")
foreach(file IN LISTS FILES)
  execute_process(COMMAND "${READELF}" -d "${file}" OUTPUT_VARIABLE dynamic RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "readelf failed on ${file}")
  endif()
  if(dynamic MATCHES "NEEDED[^\n]*libcuda\\.so")
    list(APPEND offenders "${file}")
  endif()
  if(dynamic MATCHES "NEEDED[^\n]*libcublasLt\\.so")
    list(APPEND heavy "${file}")
  endif()
endforeach()
list(LENGTH FILES checked)
if(checked EQUAL 0)
  message(FATAL_ERROR "no files to check")
endif()
if(offenders)
  message(FATAL_ERROR "linked against the CUDA driver library (libcuda.so.1): ${offenders}")
endif()
if(heavy)
  message(FATAL_ERROR "need libcublasLt at load (open it once a device is known): ${heavy}")
endif()
message(STATUS "${checked} binaries and plugins start without a CUDA driver")
