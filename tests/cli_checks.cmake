# Helpers of the CLI checks run with `cmake -P` (check_cli_try.cmake, emulator/check_cli_emulated.cmake).

# Fails unless `text` matches the regular expression `pattern`.
function(expect text pattern)
  if(NOT text MATCHES "${pattern}")
    message(FATAL_ERROR "expected /${pattern}/ in:\n${text}")
  endif()
endfunction()

# Writes to `out` a copy of the generated-kernel manifest `manifest` under the name
# `<prefix><name>`, its source named by absolute path, claiming the one shape `problem`
# instead of its own (the SIMT emulator verifies at the claimed shapes, and the shipped
# kernels claim sizes that take minutes there).
function(manifest_with_one_shape manifest prefix problem out)
  file(READ "${manifest}" text)
  get_filename_component(dir "${manifest}" DIRECTORY)
  string(REGEX REPLACE "\n\\[\\[shape\\]\\].*" "" text "${text}")
  string(REGEX REPLACE "name = \"([a-z_0-9]+)\"" "name = \"${prefix}\\1\"" text "${text}")
  string(REGEX REPLACE "source = \"([^\"/]+)\"" "source = \"${dir}/\\1\"" text "${text}")
  file(WRITE "${out}" "${text}\n[[shape]]\nproblem = \"${problem}\"\n")
endfunction()
