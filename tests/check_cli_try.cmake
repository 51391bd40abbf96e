# `arbiter try` without a GPU: a good manifest compiles (exit 0) and is verified on the SIMT
# emulator (EMULATOR=ON) or says that verification and timing could not run; a kernel that
# does not compile exits 5 with NVRTC's log; one whose launch formulas overflow on the shape it
# claims is not ok (exit 5), says which formula, and is not compiled.
# Usage: cmake -DARBITER=<arbiter program> -DGOOD=<manifest> -DBROKEN=<manifest> [-DEMULATOR=ON -DWORK=<dir>] -P ...
function(run_try manifest expected_rc)
  execute_process(COMMAND "${ARBITER}" try "${manifest}" --arch=sm_90a
                  OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
  if(NOT rc EQUAL expected_rc)
    message(FATAL_ERROR "arbiter try ${manifest}: exit ${rc}, expected ${expected_rc}\n${out}\n${err}")
  endif()
  set(try_output "${out}" PARENT_SCOPE)
endfunction()

include("${CMAKE_CURRENT_LIST_DIR}/cli_checks.cmake")

# On the SIMT emulator `try` verifies at the manifest's own shapes (64 rows of 128256 for the
# shipped softmax take minutes there, a quarter of an hour under the sanitizers): try a copy
# under its own name that claims one small shape. The kernels' full claims are the emulated
# GPU tests' to check.
if(EMULATOR)
  manifest_with_one_shape("${GOOD}" try_ "softmax bf16 rows=5 cols=3000 device=cuda" "${WORK}/try_small.toml")
  set(GOOD "${WORK}/try_small.toml")
endif()
run_try("${GOOD}" 0)
string(JSON compiled GET "${try_output}" compiled)
expect("${compiled}" "^ON$")
string(JSON cubin GET "${try_output}" compile dtypes f32 cubin_bytes)
if(cubin LESS 1000)
  message(FATAL_ERROR "implausibly small cubin (${cubin} bytes)")
endif()
string(JSON device GET "${try_output}" device)
if(device MATCHES "^no CUDA device" AND NOT EMULATOR)
  string(JSON verification GET "${try_output}" verification)
  expect("${verification}" "not run: no CUDA device")
elseif(device MATCHES "^no CUDA device")  # the SIMT emulator verifies it, and times nothing
  string(JSON verified GET "${try_output}" verified)
  expect("${verified}" "^ON$")
  string(JSON timing GET "${try_output}" timing)
  expect("${timing}" "^emulated: correctness only")
else()  # on a GPU machine the shipped kernel must pass the gate
  string(JSON verified GET "${try_output}" verified)
  expect("${verified}" "^ON$")
endif()

run_try("${BROKEN}" 5)
string(JSON compiled GET "${try_output}" compiled)
expect("${compiled}" "^OFF$")
string(JSON log GET "${try_output}" compile dtypes f32 nvrtc_log)
expect("${log}" "identifier \"undefined_name\" is undefined")
# 3000^6 is beyond int64: no launch for the one shape claimed, so the manifest is not ok.
manifest_with_one_shape("${GOOD}" overflow_ "softmax bf16 rows=5 cols=3000 device=cuda" "${WORK}/try_overflow.toml")
file(READ "${WORK}/try_overflow.toml" overflowing)
string(REPLACE "grid = [\"rows\"]" "grid = [\"cols * cols * cols * cols * cols * cols\"]" overflowing "${overflowing}")
file(WRITE "${WORK}/try_overflow.toml" "${overflowing}")
run_try("${WORK}/try_overflow.toml" 5)
string(JSON manifest_ok GET "${try_output}" manifest_ok)
expect("${manifest_ok}" "^OFF$")
string(JSON compiled GET "${try_output}" compiled)
expect("${compiled}" "^OFF$")
string(JSON manifest_error GET "${try_output}" manifest_error)
expect("${manifest_error}" "^shape 'softmax bf16 rows=5 cols=3000 device=cuda' has no launch: grid x: formula 'cols [*] cols [*] cols [*] cols [*] cols [*] cols' with cols = 3000: '[^']*' is 243000000000000000 [*] 3000, which overflows int64$")
message(STATUS "arbiter try: compiles, reports NVRTC's log, says what could not run, refuses a formula without a value")
