// KV-cache manager hot paths: a prefix-cache lookup of a 30k-token prompt (hashing 1875 blocks
// and probing the cache), and allocate/free of a whole request.
#include <benchmark/benchmark.h>

#include <vector>

#include "kv/kv_cache_manager.h"

namespace locus {
namespace {

std::vector<int32_t> prompt_of(int n, int salt) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i)
    v[static_cast<size_t>(i)] = (i * 7919 + salt) % 150000;
  return v;
}

void BM_PrefixLookup30k(benchmark::State& state) {
  KVCacheManager m({8192, 16, true});
  const auto cached = prompt_of(30000, 0);
  m.allocate_slots({1, cached, 0, 0, false}, 30000);
  m.free(1);  // evictable but still cached
  auto query = cached;
  query.push_back(5);
  RequestId id = 2;
  for (auto _ : state) {
    ComputedBlocks hit = m.get_computed_blocks({id, query, 0, 0, false});
    benchmark::DoNotOptimize(hit);
    m.free(id++);  // drops the per-request hash cache: every lookup rehashes
  }
  state.counters["hit_tokens"] = static_cast<double>(m.prefix_cache_stats().hits) /
                                 static_cast<double>(m.prefix_cache_stats().requests);
}

void BM_AllocateFreeRequest(benchmark::State& state) {
  const int len = static_cast<int>(state.range(0));
  KVCacheManager m({8192, 16, state.range(1) != 0});
  const auto tokens = prompt_of(len, 3);
  RequestId id = 1;
  for (auto _ : state) {
    benchmark::DoNotOptimize(m.allocate_slots({id, tokens, 0, 0, false}, len));
    m.free(id++);
  }
}

BENCHMARK(BM_PrefixLookup30k)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_AllocateFreeRequest)
    ->ArgNames({"tokens", "prefix_caching"})
    ->Args({2048, 1})
    ->Args({2048, 0})
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace locus
