# arbiter_emulated_objects(<out-var> SOURCES <files>... [INCLUDE_DIRECTORIES <dirs>...]
#                          [DEFINITIONS <defs>...])
#
# Compiles CUDA C++ (and the host C++ beside it) for the SIMT emulator with arbiter-emucc: the
# same sources as the nvcc build, the emulator's stand-in headers first on the include path,
# the build type's flags and, with ARBITER_SANITIZE, the sanitizers. Puts the object files in
# <out-var>, to link into a library with arbiter_emu.
function(arbiter_emulated_objects out)
  cmake_parse_arguments(ARG "" "" "SOURCES;INCLUDE_DIRECTORIES;DEFINITIONS" ${ARGN})
  string(TOUPPER "${CMAKE_BUILD_TYPE}" build_type)
  separate_arguments(flags UNIX_COMMAND "${CMAKE_CXX_FLAGS} ${CMAKE_CXX_FLAGS_${build_type}}")
  list(APPEND flags -fPIC -fvisibility=hidden -fvisibility-inlines-hidden -Wall -Wextra -Wno-unused-parameter)
  if(ARBITER_SANITIZE)
    list(APPEND flags -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  endif()
  foreach(dir IN LISTS ARG_INCLUDE_DIRECTORIES)
    list(APPEND flags "-I${dir}")
  endforeach()
  foreach(def IN LISTS ARG_DEFINITIONS)
    list(APPEND flags "-D${def}")
  endforeach()
  set(objects "")
  foreach(source IN LISTS ARG_SOURCES)
    get_filename_component(path "${source}" ABSOLUTE)
    get_filename_component(name "${source}" NAME)
    set(object "${CMAKE_CURRENT_BINARY_DIR}/emulated/${name}.o")
    add_custom_command(
      OUTPUT "${object}"
      COMMAND ${CMAKE_COMMAND} -E make_directory "${CMAKE_CURRENT_BINARY_DIR}/emulated"
      COMMAND arbiter-emucc "--compiler=${CMAKE_CXX_COMPILER}" -c "${path}" -o "${object}" -MF "${object}.d" ${flags}
      DEPENDS "${path}" arbiter-emucc
      DEPFILE "${object}.d"
      COMMENT "emucc ${name} (SIMT emulator)"
      VERBATIM)
    list(APPEND objects "${object}")
  endforeach()
  set_source_files_properties(${objects} PROPERTIES EXTERNAL_OBJECT TRUE GENERATED TRUE)
  set(${out} ${objects} PARENT_SCOPE)
endfunction()
