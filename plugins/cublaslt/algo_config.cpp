#include "algo_config.hpp"

namespace arbiter::cublaslt {

std::string AlgoConfig::name() const {
  return "algo=" + std::to_string(id) + ",tile=" + std::to_string(tile) + ",stages=" + std::to_string(stages) +
         ",splitk=" + std::to_string(splitk) + ",reduction=" + std::to_string(reduction) + ",swizzle=" +
         std::to_string(swizzle) + ",custom=" + std::to_string(custom) + ",inner=" + std::to_string(inner) +
         ",cluster=" + std::to_string(cluster);
}

AlgoConfig AlgoConfig::from(const cublasLtMatmulAlgo_t& algo) {
  AlgoConfig c;
  auto get = [&](cublasLtMatmulAlgoConfigAttributes_t attribute, auto& field) {
    size_t written = 0;
    cublasLtMatmulAlgoConfigGetAttribute(&algo, attribute, &field, sizeof field, &written);
  };
  get(CUBLASLT_ALGO_CONFIG_ID, c.id);
  get(CUBLASLT_ALGO_CONFIG_TILE_ID, c.tile);
  get(CUBLASLT_ALGO_CONFIG_STAGES_ID, c.stages);
  get(CUBLASLT_ALGO_CONFIG_SPLITK_NUM, c.splitk);
  get(CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, c.reduction);
  get(CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, c.swizzle);
  get(CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION, c.custom);
  get(CUBLASLT_ALGO_CONFIG_INNER_SHAPE_ID, c.inner);
  get(CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, c.cluster);
  return c;
}

}  // namespace arbiter::cublaslt
