// Safetensors startup costs: parsing a many-tensor header (a DeepSeek-V3 shard holds ~600
// tensors, Kimi-K2's biggest ~2000) and mmap-open + first touch of a large file whose pages are
// already in the page cache (the common restart case). Results go to docs/benchmarks.md.
#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "io/safetensors_writer.h"

namespace locus {
namespace {

// The first 8 + N bytes of a file whose header describes `num_tensors` bf16 expert weights with
// real-looking names; the data region itself is never needed to parse.
struct HeaderPrefix {
  std::vector<uint8_t> bytes;
  uint64_t file_size = 0;
};

HeaderPrefix make_header_prefix(int num_tensors) {
  std::string json = R"({"__metadata__":{"format":"pt"})";
  uint64_t offset = 0;
  const uint64_t nbytes = uint64_t{64} * 128 * 2;  // bf16 [64, 128]
  for (int i = 0; i < num_tensors; ++i) {
    const char* proj = i % 3 == 0 ? "gate_proj" : (i % 3 == 1 ? "up_proj" : "down_proj");
    json += fmt::format(
        R"(,"model.layers.{}.mlp.experts.{}.{}.weight":{{"dtype":"BF16","shape":[64,128],"data_offsets":[{},{}]}})",
        i / 384, (i / 3) % 128, proj, offset, offset + nbytes);
    offset += nbytes;
  }
  json += "}";
  json.append((8 - json.size() % 8) % 8, ' ');
  HeaderPrefix prefix;
  uint64_t n = json.size();
  for (int i = 0; i < 8; ++i) {
    prefix.bytes.push_back(static_cast<uint8_t>(n >> (8 * i)));
  }
  prefix.bytes.insert(prefix.bytes.end(), json.begin(), json.end());
  prefix.file_size = 8 + n + offset;
  return prefix;
}

void BM_ParseHeader(benchmark::State& state) {
  const int num_tensors = static_cast<int>(state.range(0));
  const HeaderPrefix prefix = make_header_prefix(num_tensors);
  for (auto _ : state) {
    auto header = parse_safetensors_header(prefix.bytes, prefix.file_size, "bench.safetensors");
    if (!header) state.SkipWithError(header.error().to_string().c_str());
    benchmark::DoNotOptimize(header);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * prefix.bytes.size()));
  state.SetItemsProcessed(state.iterations() * num_tensors);  // tensors/s
  state.counters["header_bytes"] = static_cast<double>(prefix.bytes.size());
}
BENCHMARK(BM_ParseHeader)->Arg(2000)->Unit(benchmark::kMicrosecond);

// A 256 MiB file of 64 tensors of 4 MiB, written once per process and removed at exit.
class LargeFile {
 public:
  static const LargeFile& get() {
    static LargeFile file;
    return file;
  }
  const std::filesystem::path& path() const { return path_; }
  uint64_t data_bytes() const { return data_bytes_; }
  bool ok() const { return ok_; }

 private:
  LargeFile() {
    path_ = std::filesystem::temp_directory_path() /
            fmt::format("locus_safetensors_bench_{}.safetensors", static_cast<long>(::getpid()));
    NamedTensors tensors;
    for (int i = 0; i < 64; ++i) {
      auto t = Tensor::empty({1024, 2048}, DType::kBF16);
      if (!t) return;
      std::memset(t->raw_data(), i + 1, t->nbytes());
      data_bytes_ += t->nbytes();
      tensors.emplace_back(fmt::format("model.layers.{}.mlp.experts.0.w1.weight", i), *t);
    }
    ok_ = write_safetensors(path_, tensors).is_ok();
  }
  ~LargeFile() {
    std::error_code ec;
    std::filesystem::remove(path_, ec);
  }

  std::filesystem::path path_;
  uint64_t data_bytes_ = 0;
  bool ok_ = false;
};

// Open + one byte per 4 KiB page of every tensor: the cost of mapping and faulting the file in,
// which is what a loader pays before it can copy to the GPU.
void BM_OpenTouchPages(benchmark::State& state) {
  const LargeFile& large = LargeFile::get();
  if (!large.ok()) {
    state.SkipWithError("could not write the 256 MiB file");
    return;
  }
  for (auto _ : state) {
    auto file = SafetensorsFile::open(large.path());
    if (!file) {
      state.SkipWithError(file.error().to_string().c_str());
      break;
    }
    uint64_t sum = 0;
    for (const auto& info : file->tensors()) {
      auto t = file->tensor(info.name);
      const auto* p = static_cast<const uint8_t*>(t->raw_data());
      for (size_t i = 0; i < t->nbytes(); i += 4096) {
        sum += p[i];
      }
    }
    benchmark::DoNotOptimize(sum);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * large.data_bytes()));
}
BENCHMARK(BM_OpenTouchPages)->Unit(benchmark::kMillisecond)->UseRealTime();

// Open + read every byte: page faults plus memory bandwidth, i.e. a host-side checksum or copy.
void BM_OpenReadAll(benchmark::State& state) {
  const LargeFile& large = LargeFile::get();
  if (!large.ok()) {
    state.SkipWithError("could not write the 256 MiB file");
    return;
  }
  for (auto _ : state) {
    auto file = SafetensorsFile::open(large.path());
    if (!file) {
      state.SkipWithError(file.error().to_string().c_str());
      break;
    }
    uint64_t sum = 0;
    for (const auto& info : file->tensors()) {
      auto t = file->tensor(info.name);
      const auto* p = static_cast<const uint8_t*>(t->raw_data());
      const size_t n = t->nbytes();
      for (size_t i = 0; i + 8 <= n; i += 8) {
        uint64_t word;
        std::memcpy(&word, p + i, 8);  // the format does not promise alignment
        sum += word;
      }
    }
    benchmark::DoNotOptimize(sum);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * large.data_bytes()));
}
BENCHMARK(BM_OpenReadAll)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace locus
