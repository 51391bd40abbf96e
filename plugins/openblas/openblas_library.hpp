// libopenblas, loaded by the plugin itself (dlopen, not linked) so that its core type can be
// chosen before its constructor runs: a DYNAMIC_ARCH OpenBLAS picks its kernels in that
// constructor, from OPENBLAS_CORETYPE or its own CPU table, once per load.
//
// When it is loaded: at the plugin's entry only when the entry cannot describe it otherwise
// (no memo of this situation, openblas_memo.hpp, or OpenBLAS already in the process); else at
// the first supports() or launch, which checks that the library says what the entry announced
// (configuration and core: the runtime_version every tuned entry is validated by) before any
// kernel runs, and that everything the load mapped is a file only root can write.
#pragma once

#include "openblas_coretype.hpp"

#include <cblas.h>

#include <string>
#include <vector>

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
  const std::string& loaded_as() const { return loaded_as_; }  // the loader's name for the file
  // The real paths of the objects this load added to the process (none when the host had
  // OpenBLAS loaded already).
  const std::vector<std::string>& mapped() const { return mapped_; }
  bool loaded_before_plugin() const { return loaded_before_plugin_; }

 private:
  void open(const char* coretype);  // nullptr: OpenBLAS chooses
  void close();
  void resolve();

  void* handle_ = nullptr;
  decltype(&openblas_get_config) get_config_ = nullptr;
  decltype(&openblas_get_corename) get_corename_ = nullptr;
  CoreDecision decision_;
  std::string loaded_as_;
  std::vector<std::string> mapped_;
  bool loaded_before_plugin_ = false;
};

// What the plugin's entry says about OpenBLAS: its openblas_get_config() (the runtime_version)
// and the core decision, from the memo or from loading the library now.
struct Announcement {
  std::string config;
  CoreDecision decision;
  bool deferred = false;  // from the memo: the library is loaded at first use
  std::string memo_key;   // this process's situation (openblas_memo.hpp); "" when OpenBLAS was here first
};
// Computed once; throws std::runtime_error (refusing the plugin) when the library had to be
// loaded now and could not be.
const Announcement& announcement();

// The library for the kernels, loaded on the first call (thread-safe), or why the plugin's
// kernels refuse everything: it cannot be loaded, it says other than the announcement, or its
// load mapped a file someone other than root could have written. Never throws.
struct CheckedLibrary {
  const OpenBlasLibrary* library = nullptr;
  std::string error;
  bool ok() const { return library != nullptr; }
};
const CheckedLibrary& openblas_library();

}  // namespace arbiter::plugins::openblas
