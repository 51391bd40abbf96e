// Opening a vendor library at run time instead of linking it (cuBLASLt, NVRTC): the library
// is mapped only by a process that uses it, and its functions are reached through pointers
// resolved once by name.
#pragma once

#include <dlfcn.h>

#include <cstddef>
#include <initializer_list>
#include <string>

namespace arbiter {

// Opens the first of `files` (a SONAME or a path) that loads, kept for the process, and
// resolves `count` functions by `names` into `resolved`. "" on success, else why not.
inline std::string open_library_symbols(std::initializer_list<const char*> files, const char* const* names,
                                        size_t count, void** resolved) {
  void* library = nullptr;
  const char* opened = nullptr;
  std::string failure;
  for (const char* file : files) {
    library = ::dlopen(file, RTLD_NOW | RTLD_LOCAL);
    if (library != nullptr) {
      opened = file;
      break;
    }
    const char* why = ::dlerror();
    failure += (failure.empty() ? "cannot load " : "; ") + std::string(why != nullptr ? why : file);
  }
  if (library == nullptr) return failure;
  for (size_t s = 0; s < count; ++s) {
    resolved[s] = ::dlsym(library, names[s]);
    if (resolved[s] == nullptr) return std::string(opened) + " has no " + names[s];
  }
  return "";
}

}  // namespace arbiter
