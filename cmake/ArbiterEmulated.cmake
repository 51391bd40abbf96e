# arbiter_emulated_objects(<out-var> SOURCES <files>... [INCLUDE_DIRECTORIES <dirs>...]
#                          [DEFINITIONS <defs>...] [FLAGS_VAR <var>])
#
# Compiles CUDA C++ (and the host C++ beside it) for the SIMT emulator with arbiter-emucc: the
# same sources as the nvcc build, the emulator's stand-in headers first on the include path,
# the build type's flags and, with ARBITER_SANITIZE, the sanitizers. Puts the object files in
# <out-var>, to link into a library with arbiter_emu; the compiler flags in FLAGS_VAR.
function(arbiter_emulated_objects out)
  cmake_parse_arguments(ARG "" "FLAGS_VAR" "SOURCES;INCLUDE_DIRECTORIES;DEFINITIONS" ${ARGN})
  string(TOUPPER "${CMAKE_BUILD_TYPE}" build_type)
  separate_arguments(flags UNIX_COMMAND "${CMAKE_CXX_FLAGS} ${CMAKE_CXX_FLAGS_${build_type}}")
  # -Wno-psabi: GCC notes that passing a 64-byte aligned CUtensorMap changed ABI in GCC 4.6.
  list(APPEND flags -fPIC -fvisibility=hidden -fvisibility-inlines-hidden -Wall -Wextra -Wno-unused-parameter -Wno-psabi)
  if(ARBITER_SANITIZE)
    # -O1 over the Debug build's -O0: emulated code at -O0 under the sanitizers is too slow
    # for the emulated tests (the sanitizers see the same accesses at -O1).
    list(APPEND flags -O1 -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  endif()
  foreach(dir IN LISTS ARG_INCLUDE_DIRECTORIES)
    if(NOT dir IN_LIST CMAKE_CXX_IMPLICIT_INCLUDE_DIRECTORIES)  # -I/usr/include would reorder the system's
      list(APPEND flags "-I${dir}")
    endif()
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
  if(ARG_FLAGS_VAR)
    set(${ARG_FLAGS_VAR} ${flags} PARENT_SCOPE)
  endif()
endfunction()

# arbiter_add_emulated_plugin(<name> SOURCES <files>... [INCLUDE_DIRECTORIES <dirs>...]
#                             [HASH_DIRS <dirs>...] [LIBRARIES <targets>...])
#
# The SIMT emulator's build of a CUDA plugin: the same sources (plugin host code and kernels)
# compiled by arbiter-emucc, linked with arbiter_emu into arbiter_<name>.so in the emulated
# plugin folder (<libdir>/arbiter/plugins-emulated). The target is arbiter_<name>_emulated;
# its build id differs from the GPU build's. The sources, objects and flags are kept in the
# global properties ARBITER_EMULATED_<name>_{SOURCES,OBJECTS,FLAGS}: the mutation test
# rebuilds the plugin from altered copies of its sources with them.
function(arbiter_add_emulated_plugin name)
  cmake_parse_arguments(ARG "" "" "SOURCES;INCLUDE_DIRECTORIES;DEFINITIONS;HASH_DIRS;LIBRARIES" ${ARGN})
  arbiter_plugin_build_id(build_id SOURCES ${ARG_SOURCES}
                          HASH_DIRS ${ARG_HASH_DIRS} "${PROJECT_SOURCE_DIR}/emulator/include"
                                    "${PROJECT_SOURCE_DIR}/emulator/include/arbiter_emulator"
                          SALT "SIMT emulator")
  arbiter_emulated_objects(objects SOURCES ${ARG_SOURCES}
    INCLUDE_DIRECTORIES ${ARG_INCLUDE_DIRECTORIES} "${ARBITER_PUBLIC_INCLUDE_DIR}" "${DLPACK_INCLUDE_DIR}"
                        "${PROJECT_SOURCE_DIR}/plugins/common" "${PROJECT_SOURCE_DIR}/base"
    DEFINITIONS "ARBITER_PLUGIN_BUILD_ID=\"${build_id}\"" ${ARG_DEFINITIONS}
    FLAGS_VAR flags)
  set(sources "")
  foreach(source IN LISTS ARG_SOURCES)
    get_filename_component(path "${source}" ABSOLUTE)
    list(APPEND sources "${path}")
  endforeach()
  set_property(GLOBAL PROPERTY ARBITER_EMULATED_${name}_SOURCES ${sources})
  set_property(GLOBAL PROPERTY ARBITER_EMULATED_${name}_OBJECTS ${objects})
  set_property(GLOBAL PROPERTY ARBITER_EMULATED_${name}_FLAGS ${flags})
  set(target arbiter_${name}_emulated)
  add_library(${target} MODULE ${objects})
  file(RELATIVE_PATH to_lib "/p/${ARBITER_EMULATED_PLUGIN_INSTALL_DIR}" "/p/${CMAKE_INSTALL_LIBDIR}")
  set_target_properties(${target} PROPERTIES PREFIX "" OUTPUT_NAME "arbiter_${name}" LINKER_LANGUAGE CXX
                                             LIBRARY_OUTPUT_DIRECTORY "${ARBITER_EMULATED_PLUGIN_OUTPUT_DIR}"
                                             INSTALL_RPATH "$ORIGIN/${to_lib}")
  target_link_libraries(${target} PRIVATE arbiter_emu ${ARG_LIBRARIES})
  target_link_options(${target} PRIVATE -Wl,--no-undefined)
  install(TARGETS ${target} LIBRARY DESTINATION ${ARBITER_EMULATED_PLUGIN_INSTALL_DIR})
endfunction()
