# arbiter_add_plugin(<name> SOURCES <files>... [HASH_DIRS <dirs>...] [OUTPUT_DIRECTORY <dir>])
#
# Builds an arbiter plugin: a MODULE library named arbiter_<name>.so (the file name the
# host searches for), hidden visibility so only arbiter_plugin_entry is exported, no
# undefined symbols, never linked to libarbiter. The target is arbiter_<name>.
#
# ARBITER_PLUGIN_BUILD_ID is set to a hash of what is compiled: the sources, the headers
# beside them and in HASH_DIRS, arbiter's public headers and arbiter_base, the compiler and the flags. Any
# change there changes the build id, which invalidates the plugin's tuning-table entries.
# (CMake re-runs when a hashed file changes.)
function(arbiter_add_plugin name)
  cmake_parse_arguments(ARG "" "OUTPUT_DIRECTORY" "SOURCES;HASH_DIRS" ${ARGN})
  set(target arbiter_${name})
  add_library(${target} MODULE ${ARG_SOURCES})
  set_target_properties(${target} PROPERTIES
    PREFIX ""
    OUTPUT_NAME "arbiter_${name}"
    CXX_VISIBILITY_PRESET hidden
    C_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON)
  if(ARG_OUTPUT_DIRECTORY)
    set_target_properties(${target} PROPERTIES LIBRARY_OUTPUT_DIRECTORY "${ARG_OUTPUT_DIRECTORY}")
  endif()
  target_link_libraries(${target} PRIVATE arbiter::plugin)
  target_link_options(${target} PRIVATE -Wl,--no-undefined)

  arbiter_plugin_build_id(build_id SOURCES ${ARG_SOURCES} HASH_DIRS ${ARG_HASH_DIRS})
  target_compile_definitions(${target} PRIVATE ARBITER_PLUGIN_BUILD_ID="${build_id}")
endfunction()

# arbiter_plugin_build_id(<out-var> SOURCES <files>... [HASH_DIRS <dirs>...] [SALT <text>])
#
# The build id of a plugin: a hash of its sources, the headers beside them and in HASH_DIRS,
# arbiter's public headers and arbiter_base, the compiler and the flags (SALT tells builds of the same sources
# apart, e.g. the SIMT emulator's).
function(arbiter_plugin_build_id out)
  cmake_parse_arguments(ARG "" "SALT" "SOURCES;HASH_DIRS" ${ARGN})
  set(hashed_files "")
  set(header_dirs ${ARG_HASH_DIRS} ${ARBITER_PUBLIC_INCLUDE_DIR}/arbiter ${ARBITER_BASE_INCLUDE_DIR})
  foreach(source IN LISTS ARG_SOURCES)
    get_filename_component(path "${source}" ABSOLUTE)
    list(APPEND hashed_files "${path}")
    get_filename_component(dir "${path}" DIRECTORY)
    list(APPEND header_dirs "${dir}")
  endforeach()
  list(REMOVE_DUPLICATES header_dirs)
  foreach(dir IN LISTS header_dirs)
    file(GLOB headers "${dir}/*.h" "${dir}/*.hpp" "${dir}/*.cuh")
    list(APPEND hashed_files ${headers})
  endforeach()
  list(REMOVE_DUPLICATES hashed_files)
  list(SORT hashed_files)
  string(TOUPPER "${CMAKE_BUILD_TYPE}" build_type)
  set(fingerprint "${CMAKE_CXX_COMPILER_ID} ${CMAKE_CXX_COMPILER_VERSION} ${CMAKE_BUILD_TYPE} ${CMAKE_CXX_FLAGS} ${CMAKE_CXX_FLAGS_${build_type}}")
  if(CMAKE_CUDA_COMPILER_LOADED)  # CUDA sources: nvcc and its flags are part of what is compiled
    string(APPEND fingerprint " ${CMAKE_CUDA_COMPILER_VERSION} ${CMAKE_CUDA_FLAGS} ${CMAKE_CUDA_FLAGS_${build_type}} ${ARBITER_CUDA_ARCHITECTURES}")
  endif()
  foreach(file IN LISTS hashed_files)
    file(SHA256 "${file}" hash)
    string(APPEND fingerprint " ${hash}")
    set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${file}")
  endforeach()
  string(APPEND fingerprint " ${ARG_SALT}")
  string(SHA256 build_id "${fingerprint}")
  string(SUBSTRING "${build_id}" 0 16 build_id)
  set(${out} "${build_id}" PARENT_SCOPE)
endfunction()
