# arbiter_add_plugin(<name> SOURCES <files>... [OUTPUT_DIRECTORY <dir>])
#
# Builds an arbiter plugin: a MODULE library named arbiter_<name>.so (the file name the
# host searches for), hidden visibility so only arbiter_plugin_entry is exported, no
# undefined symbols, never linked to libarbiter. The target is arbiter_<name>.
# ARBITER_PLUGIN_BUILD_ID is set to a hash of the sources, so any change to what is
# compiled changes the plugin's build id.
function(arbiter_add_plugin name)
  cmake_parse_arguments(ARG "" "OUTPUT_DIRECTORY" "SOURCES" ${ARGN})
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

  set(hashes "")
  foreach(source IN LISTS ARG_SOURCES)
    get_filename_component(path "${source}" ABSOLUTE)
    file(SHA256 "${path}" hash)
    string(APPEND hashes "${hash}")
    set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${path}")
  endforeach()
  string(SHA256 build_id "${hashes}")
  string(SUBSTRING "${build_id}" 0 16 build_id)
  target_compile_definitions(${target} PRIVATE ARBITER_PLUGIN_BUILD_ID="${build_id}")
endfunction()
