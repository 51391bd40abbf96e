// libopenblas, loaded by the plugin itself (dlopen, not linked) so that its core type can be
// chosen before its constructor runs: a DYNAMIC_ARCH OpenBLAS picks its kernels in that
// constructor, from OPENBLAS_CORETYPE or its own CPU table, once per load.
#pragma once

#include "openblas_coretype.hpp"

#include <cblas.h>

#include <string>

namespace arbiter::plugins::openblas {

class OpenBlasLibrary {
 public:
  // Loads the library (or takes the copy the host already has), decides the core
  // (decide_core) and loads it again with OPENBLAS_CORETYPE when the decision says so.
  // Throws std::runtime_error when the library or one of its functions is missing.
  OpenBlasLibrary();
  ~OpenBlasLibrary();
  OpenBlasLibrary(const OpenBlasLibrary&) = delete;
  OpenBlasLibrary& operator=(const OpenBlasLibrary&) = delete;

  decltype(&cblas_sgemm) sgemm = nullptr;

  std::string config() const;  // openblas_get_config(): version, build options, core
  std::string core() const;    // openblas_get_corename(): the core that runs
  const CoreDecision& decision() const { return decision_; }

 private:
  void open(const char* coretype);  // nullptr: OpenBLAS chooses
  void close();
  void resolve();

  void* handle_ = nullptr;
  decltype(&openblas_get_config) get_config_ = nullptr;
  decltype(&openblas_get_corename) get_corename_ = nullptr;
  CoreDecision decision_;
};

// The one instance of this plugin load, created on first use (the plugin's entry).
const OpenBlasLibrary& openblas_library();

}  // namespace arbiter::plugins::openblas
