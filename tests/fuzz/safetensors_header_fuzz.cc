// Fuzzes the safetensors header parser with each input taken as a whole file. Whatever the
// parser accepts must describe only bytes inside the input: every accepted tensor is viewed
// through the same code path the mmap reader uses and all of its bytes are read, so ASan flags
// any range the validation let through. Must never call anything that does I/O.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <span>

#include "io/safetensors.h"

namespace {

void check(bool condition) {
  if (!condition) std::abort();
}

void exercise(std::span<const uint8_t> file, const locus::SafetensorsParseOptions& options) {
  auto header = locus::parse_safetensors_header(file, file.size(), "fuzz.safetensors", options);
  if (!header) {
    check(!header.error().message().empty());
    return;
  }
  check(header->data_offset == 8 + header->header_size);
  check(header->data_offset + header->data_size == file.size());
  // A view over exactly the input bytes: nothing past them is addressable without ASan noticing.
  auto keep_alive = std::shared_ptr<const void>(file.data(), [](const void*) {});
  volatile uint8_t sink = 0;
  for (const auto& info : header->tensors) {
    check(header->find(info.name) == &info);
    check(info.data_begin <= info.data_end && info.data_end <= header->data_size);
    auto tensor = locus::safetensors_tensor_view(*header, info, file, keep_alive);
    check(tensor.has_value());
    check(tensor->nbytes() == info.nbytes());
    const auto* bytes = static_cast<const uint8_t*>(tensor->raw_data());
    uint8_t x = 0;
    for (size_t i = 0; i < tensor->nbytes(); ++i) {
      x = static_cast<uint8_t>(x ^ bytes[i]);
    }
    sink = static_cast<uint8_t>(sink ^ x);
  }
  (void)sink;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const uint8_t> file(data, size);
  locus::SafetensorsParseOptions strict;
  exercise(file, strict);
  locus::SafetensorsParseOptions lenient;
  lenient.require_full_coverage = false;
  exercise(file, lenient);
  return 0;
}
