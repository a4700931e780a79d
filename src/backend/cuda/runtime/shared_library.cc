#include "backend/cuda/runtime/shared_library.h"

#include <dlfcn.h>
#include <fmt/format.h>

namespace locus::cuda {

Expected<SharedLibrary> SharedLibrary::open_first(const std::vector<std::string>& candidates,
                                                  int flags) {
  std::string first_error;
  for (const std::string& name : candidates) {
    void* lib = dlopen(name.c_str(), flags);
    if (lib != nullptr) return SharedLibrary{lib, name};
    const char* why = dlerror();
    if (first_error.empty()) first_error = why != nullptr ? why : name;
  }
  return unsupported(first_error.empty() ? std::string("no library to open") : first_error);
}

void* SharedLibrary::symbol(const char* entry_point) const {
  return dlsym(handle, entry_point);
}

void SymbolResolver::missing(const char* symbol) {
  if (!failure_.is_ok()) return;
  failure_ = unsupported(hint_.empty() ? fmt::format("{} has no {}", lib_.name, symbol)
                                       : fmt::format("{} has no {}: {}", lib_.name, symbol, hint_));
}

}  // namespace locus::cuda
