# What a user meets first with the arbiter program (cmake -P; -DARBITER=program -DWORK=folder
# -DBUILD=build folder): found through PATH from any folder it still finds its installation's
# plugins; a copy with no installation beside it says "no plugin loaded" instead of running
# only the oracle; `arbiter COMMAND --help` prints that command's help; an installation
# carries the suite format and an example suite, which its arbiter reads.
include("${CMAKE_CURRENT_LIST_DIR}/cli_checks.cmake")
get_filename_component(bin "${ARBITER}" DIRECTORY)
get_filename_component(program "${ARBITER}" NAME)
set(elsewhere "${WORK}/cli_basics")

set(prefix "${elsewhere}/prefix")
execute_process(COMMAND ${CMAKE_COMMAND} --install "${BUILD}" --prefix "${prefix}" RESULT_VARIABLE rc OUTPUT_QUIET)
expect("${rc}" "^0$")
foreach(file doc/suite-format.md doc/problem-syntax.md suites/cpu-small.toml)
  if(NOT EXISTS "${prefix}/share/arbiter/${file}")
    message(FATAL_ERROR "the installation has no share/arbiter/${file}")
  endif()
endforeach()
execute_process(COMMAND ${CMAKE_COMMAND} -E env --unset=ARBITER_PLUGIN_PATH "PATH=${prefix}/bin:$ENV{PATH}" arbiter
                        verify --suite=${prefix}/share/arbiter/suites/cpu-small.toml --kernel=cpu.softmax
                WORKING_DIRECTORY "${elsewhere}" RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
expect("${rc}" "^0$")
expect("${out}" "[1-9][0-9]* verdicts: [1-9][0-9]* passed, 0 failed")
file(REMOVE_RECURSE "${elsewhere}")
file(MAKE_DIRECTORY "${elsewhere}/lonely")

execute_process(COMMAND ${CMAKE_COMMAND} -E env --unset=ARBITER_PLUGIN_PATH "PATH=${bin}:$ENV{PATH}" ${program} plugins
                WORKING_DIRECTORY "${elsewhere}" RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
expect("${rc}" "^0$")
expect("${out}" "the install's folder \\(/[^)]+/plugins\\)")
expect("${out}" "\ncpu [0-9.]+  \\[hand_tuned\\]")

file(COPY "${ARBITER}" DESTINATION "${elsewhere}/lonely")
foreach(command run tune)
  execute_process(COMMAND ${CMAKE_COMMAND} -E env --unset=ARBITER_PLUGIN_PATH "${elsewhere}/lonely/${program}" ${command}
                          softmax f32 rows=2 cols=8
                  WORKING_DIRECTORY "${elsewhere}" RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  expect("${rc}" "^1$")
  expect("${err}" "ARB_ERR_PLUGIN: ${command}: no plugin loaded: no plugin file found")
endforeach()

foreach(words "tune;--help" "help;tune")
  execute_process(COMMAND "${ARBITER}" ${words} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  expect("${rc}" "^0$")
  expect("${out}" "usage: arbiter \\[--config FILE\\] tune")
  expect("${out}" "  tune <problem \\| --suite=FILE>")
  expect("${out}" "A problem is written")
endforeach()
execute_process(COMMAND "${ARBITER}" table --help RESULT_VARIABLE rc OUTPUT_VARIABLE out)
expect("${rc}" "^0$")
expect("${out}" "table merge OUT IN")

set(prefix "${elsewhere}/prefix")
execute_process(COMMAND ${CMAKE_COMMAND} --install "${BUILD}" --prefix "${prefix}" RESULT_VARIABLE rc OUTPUT_QUIET)
expect("${rc}" "^0$")
foreach(file doc/suite-format.md doc/problem-syntax.md suites/cpu-small.toml)
  if(NOT EXISTS "${prefix}/share/arbiter/${file}")
    message(FATAL_ERROR "the installation has no share/arbiter/${file}")
  endif()
endforeach()
execute_process(COMMAND ${CMAKE_COMMAND} -E env --unset=ARBITER_PLUGIN_PATH "PATH=${prefix}/bin:$ENV{PATH}" arbiter
                        verify --suite=${prefix}/share/arbiter/suites/cpu-small.toml --kernel=cpu.softmax
                WORKING_DIRECTORY "${elsewhere}" RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
expect("${rc}" "^0$")
expect("${out}" "[1-9][0-9]* verdicts: [1-9][0-9]* passed, 0 failed")
file(REMOVE_RECURSE "${elsewhere}")
