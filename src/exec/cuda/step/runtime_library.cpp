// RuntimeLibrary: dlopen and dlsym, the first failure kept in words.
#include "exec/cuda/step/runtime_library.h"

#include <dlfcn.h>

#include "core/error.h"

namespace kvf::exec::cuda::step {

RuntimeLibrary::RuntimeLibrary(const char* soname) : soname_(soname) {
  handle_ = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
  if (handle_ == nullptr) {
    const char* why = dlerror();
    error_ = why != nullptr ? why : str_cat(soname, " cannot be loaded");
  }
}

void* RuntimeLibrary::symbol(const char* name) {
  if (handle_ == nullptr) return nullptr;
  void* p = dlsym(handle_, name);
  if (p == nullptr && error_.empty()) error_ = str_cat(soname_, " has no ", name);
  return p;
}

}  // namespace kvf::exec::cuda::step
