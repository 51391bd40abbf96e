#include "lt_library.hpp"

#include "arbiter_base/library_symbols.hpp"

#include <arbiter/plugin.hpp>

#include <cublasLt.h>

#include <cstddef>
#include <mutex>
#include <string>

namespace {

// The functions the plugin calls, by name; cuBLASLt's inline *Init helpers call the
// *_internal ones.
enum Symbol : size_t {
  create,
  get_version,
  matmul,
  algo_config_get_attribute,
  algo_get_heuristic,
  desc_init,
  desc_set_attribute,
  preference_init,
  preference_set_attribute,
  layout_init,
  symbol_count
};
constexpr const char* kNames[symbol_count] = {
    "cublasLtCreate", "cublasLtGetVersion", "cublasLtMatmul", "cublasLtMatmulAlgoConfigGetAttribute",
    "cublasLtMatmulAlgoGetHeuristic", "cublasLtMatmulDescInit_internal",
    "cublasLtMatmulDescSetAttribute", "cublasLtMatmulPreferenceInit_internal", "cublasLtMatmulPreferenceSetAttribute",
    "cublasLtMatrixLayoutInit_internal"};

void* resolved[symbol_count] = {};  // written once under load_cublaslt's call_once

template <typename Fn>
Fn at(Symbol symbol) {
  return reinterpret_cast<Fn>(resolved[symbol]);
}

}  // namespace

namespace arbiter::plugin {

void load_cublaslt() {
  static std::once_flag once;
  static std::string failure;
  std::call_once(once, [] { failure = open_library_symbols({ARBITER_CUBLASLT_SONAME}, kNames, symbol_count, resolved); });
  if (!failure.empty()) throw Error(ARB_ERR_UNSUPPORTED, failure);
}

}  // namespace arbiter::plugin

// The forwarders, with cublasLt.h's signatures (hidden: the plugin exports only its entry).
#define ARB_LT_FORWARD(name, symbol, ...) return at<decltype(&name)>(symbol)(__VA_ARGS__)

extern "C" {

cublasStatus_t cublasLtCreate(cublasLtHandle_t* handle) { ARB_LT_FORWARD(cublasLtCreate, create, handle); }

size_t cublasLtGetVersion(void) { ARB_LT_FORWARD(cublasLtGetVersion, get_version); }

cublasStatus_t cublasLtMatmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const void* alpha, const void* a,
                              cublasLtMatrixLayout_t a_layout, const void* b, cublasLtMatrixLayout_t b_layout,
                              const void* beta, const void* c, cublasLtMatrixLayout_t c_layout, void* d,
                              cublasLtMatrixLayout_t d_layout, const cublasLtMatmulAlgo_t* algo, void* workspace,
                              size_t workspace_bytes, cudaStream_t stream) {
  ARB_LT_FORWARD(cublasLtMatmul, matmul, handle, desc, alpha, a, a_layout, b, b_layout, beta, c, c_layout, d, d_layout,
                 algo, workspace, workspace_bytes, stream);
}



cublasStatus_t cublasLtMatmulAlgoConfigGetAttribute(const cublasLtMatmulAlgo_t* algo,
                                                    cublasLtMatmulAlgoConfigAttributes_t attr, void* buf, size_t size,
                                                    size_t* written) {
  ARB_LT_FORWARD(cublasLtMatmulAlgoConfigGetAttribute, algo_config_get_attribute, algo, attr, buf, size, written);
}


cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t a,
                                              cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
                                              cublasLtMatmulPreference_t preference, int requested,
                                              cublasLtMatmulHeuristicResult_t results[], int* returned) {
  ARB_LT_FORWARD(cublasLtMatmulAlgoGetHeuristic, algo_get_heuristic, handle, desc, a, b, c, d, preference, requested,
                 results, returned);
}


cublasStatus_t cublasLtMatmulDescInit_internal(cublasLtMatmulDesc_t desc, size_t size, cublasComputeType_t compute,
                                               cudaDataType_t scale) {
  ARB_LT_FORWARD(cublasLtMatmulDescInit_internal, desc_init, desc, size, compute, scale);
}

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr,
                                              const void* buf, size_t size) {
  ARB_LT_FORWARD(cublasLtMatmulDescSetAttribute, desc_set_attribute, desc, attr, buf, size);
}

cublasStatus_t cublasLtMatmulPreferenceInit_internal(cublasLtMatmulPreference_t preference, size_t size) {
  ARB_LT_FORWARD(cublasLtMatmulPreferenceInit_internal, preference_init, preference, size);
}

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t preference,
                                                    cublasLtMatmulPreferenceAttributes_t attr, const void* buf,
                                                    size_t size) {
  ARB_LT_FORWARD(cublasLtMatmulPreferenceSetAttribute, preference_set_attribute, preference, attr, buf, size);
}

cublasStatus_t cublasLtMatrixLayoutInit_internal(cublasLtMatrixLayout_t layout, size_t size, cudaDataType type,
                                                 uint64_t rows, uint64_t cols, int64_t ld) {
  ARB_LT_FORWARD(cublasLtMatrixLayoutInit_internal, layout_init, layout, size, type, rows, cols, ld);
}

}  // extern "C"
