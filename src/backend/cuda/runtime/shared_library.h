// Opening a vendor library at run time (cuBLAS, cuBLASLt, NCCL) and resolving its entry points
// into typed function pointers, with one clear error for the first thing that is missing.
// The binary then links none of them: it starts without them and says what to install.
#pragma once

#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/status.h"

namespace locus::cuda {

struct SharedLibrary {
  void* handle = nullptr;  // never closed: the entry points live as long as the process
  std::string name;        // the candidate that opened

  // The first of `candidates` that dlopen opens with `flags`; else unsupported(), with the
  // first candidate's dlerror().
  static Expected<SharedLibrary> open_first(const std::vector<std::string>& candidates, int flags);

  void* symbol(const char* entry_point) const;
};

// Resolves entry points one after another and keeps the first failure:
//   SymbolResolver r(lib, "install X");  r(api.create, "xCreate");  ...  r.status()
class SymbolResolver {
 public:
  // `hint` ends the message of a missing symbol (empty: none).
  SymbolResolver(const SharedLibrary& lib, std::string hint) : lib_(lib), hint_(std::move(hint)) {}

  template <typename Fn>
  void operator()(Fn& fn, const char* symbol) {
    static_assert(std::is_pointer_v<Fn>, "resolve into a function pointer");
    fn = reinterpret_cast<Fn>(lib_.symbol(symbol));
    if (fn == nullptr) missing(symbol);
  }
  const Status& status() const { return failure_; }

 private:
  void missing(const char* symbol);

  const SharedLibrary& lib_;
  std::string hint_;
  Status failure_ = Status::ok();
};

}  // namespace locus::cuda
