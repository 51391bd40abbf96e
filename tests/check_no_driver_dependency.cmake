# Every binary and plugin must start on a machine without an NVIDIA driver: the CUDA
# runtime loads libcuda itself when a device is asked for. A DT_NEEDED on libcuda.so.1
# (for example from linking the toolkit's stub) would make the program fail to start, or
# the plugin be rejected, before arbiter can say "no CUDA device".
# Usage: cmake -DREADELF=... -DFILES="a;b;c" -P check_no_driver_dependency.cmake
set(offenders "")
foreach(file IN LISTS FILES)
  execute_process(COMMAND "${READELF}" -d "${file}" OUTPUT_VARIABLE dynamic RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "readelf failed on ${file}")
  endif()
  if(dynamic MATCHES "NEEDED[^\n]*libcuda\\.so")
    list(APPEND offenders "${file}")
  endif()
endforeach()
list(LENGTH FILES checked)
if(checked EQUAL 0)
  message(FATAL_ERROR "no files to check")
endif()
if(offenders)
  message(FATAL_ERROR "linked against the CUDA driver library (libcuda.so.1): ${offenders}")
endif()
message(STATUS "${checked} binaries and plugins start without a CUDA driver")
