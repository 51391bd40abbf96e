// cuBLASLt, loaded only once a CUDA device is known to exist. The plugin does not link
// libcublasLt (a few hundred MB to map: about 250 ms of every context on a host without a
// GPU, where the plugin has nothing to offer); lt_library.cpp defines the cuBLASLt functions
// the plugin calls as forwarders to the library load_cublaslt() opens.
#pragma once

namespace arbiter::plugin {

// Opens libcublasLt (the toolkit's major version) and resolves every function the plugin
// calls; idempotent and thread-safe. Throws Error(ARB_ERR_UNSUPPORTED) naming what is missing.
void load_cublaslt();

}  // namespace arbiter::plugin
