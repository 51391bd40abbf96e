# The command line on the SIMT emulator: `arbiter try --device=cuda-emulated` gives a real
# verdict and no time (an honest generated kernel passes, a racy cheater fails for its race),
# `arbiter verify --device=cuda-emulated` runs the hand-written CUDA kernels through the gate, and
# `arbiter run` dispatches a CUDA problem there with shadow checks.
# Usage: cmake -DARBITER=<arbiter program> -DSOURCE=<project source dir> -DWORK=<scratch dir> -P check_cli_emulated.cmake
function(run expected_rc)
  execute_process(COMMAND "${ARBITER}" ${ARGN} OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
  if(NOT rc EQUAL expected_rc)
    message(FATAL_ERROR "arbiter ${ARGN}: exit ${rc}, expected ${expected_rc}\n${out}\n${err}")
  endif()
  set(output "${out}" PARENT_SCOPE)
endfunction()

include("${CMAKE_CURRENT_LIST_DIR}/../cli_checks.cmake")

# The shipped softmax under its own name, claiming one small shape (its real claims, 64 rows of
# 128256, take minutes on the emulator at full size).
manifest_with_one_shape("${SOURCE}/plugins/generated/kernels/softmax_rowblock.toml" cli_
                        "softmax bf16 rows=5 cols=3000 device=cuda" "${WORK}/cli_softmax_rowblock.toml")
run(0 try "${WORK}/cli_softmax_rowblock.toml" --device=cuda-emulated)
string(JSON emulated GET "${output}" emulated)
expect("${emulated}" "^ON$")
string(JSON verified GET "${output}" verified)
expect("${verified}" "^ON$")
string(JSON timing GET "${output}" timing)
expect("${timing}" "^emulated: correctness only")
string(JSON checks GET "${output}" verification 0 checks)
expect("${checks}" "^passed: 3 trials")

# The shipped decode attention (attention.v1), one small causal GQA shape in bf16 and an f32 one
# at head_dim 200 (its claims, 4096 keys of 32 heads, take long on the emulator).
foreach(shape IN ITEMS "attention bf16 batch=2 q=3 kv=70 heads=4 kvheads=2 dim=64 causal=1 device=cuda"
                       "attention f32 q=2 kv=130 heads=6 kvheads=3 dim=200 device=cuda")
  manifest_with_one_shape("${SOURCE}/plugins/generated/kernels/decode_attention.toml" cli_ "${shape}"
                          "${WORK}/cli_decode_attention.toml")
  run(0 try "${WORK}/cli_decode_attention.toml" --device=cuda-emulated)
  string(JSON verified GET "${output}" verified)
  expect("${verified}" "^ON$")
  string(JSON checks GET "${output}" verification 0 checks)
  expect("${checks}" "^passed: 3 trials")
endforeach()

run(5 try "${SOURCE}/tests/fixtures/generated_cheaters/racy.toml" --device=cuda-emulated)
string(JSON verified GET "${output}" verified)
expect("${verified}" "^OFF$")
string(JSON checks GET "${output}" verification 0 checks)
expect("${checks}" "rerun_differs")

run(0 verify rmsnorm bf16 rows=5 cols=1000 residual=1 --device=cuda-emulated --plugin=cuda)
expect("${output}" "device=cuda")
expect("${output}" "cuda.rmsnorm_vec16 +hand_tuned +passed")
expect("${output}" "1 verdict: 1 passed, 0 failed")
# `arbiter run` on a CUDA problem: operands in the emulated device's memory, calls through
# dispatch with shadow checks (the check copies inputs and outputs through the device), the
# result checked against the oracle, and no time.
run(0 run softmax f32 rows=4 cols=64 device=cuda --device=cuda-emulated --calls=8)
expect("${output}" "shadow: +[1-8] of 8 calls through dispatch checked against the oracle \\(verify.shadow_one_in = 4\\): all matched")
expect("${output}" "check: +relative norm error [^\n]* PASS")
expect("${output}" "time: +not measured: the CUDA device is the SIMT emulator")
message(STATUS "arbiter try, verify and run on the SIMT emulator: real verdicts, no times")
