// Picks the data-parallel replica for a request, after SGLang's cache-aware router: the replica
// that most likely holds the longest cached prefix of the prompt, unless the replicas' loads are
// out of balance, then the least loaded one. A replica's cache is approximated by the block
// hashes of the prompts routed to it (an LRU as large as its KV pool), so no replica is asked
// and routing costs no cross-thread call.
#pragma once

#include <cstdint>
#include <list>
#include <span>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "kv/block_hash.h"

namespace locus {

struct BalancerOptions {
  // Loads (unfinished requests) count as out of balance when the busiest replica has more than
  // `abs_threshold` more than the idlest and more than `rel_threshold` times as many.
  int abs_threshold = 32;
  double rel_threshold = 1.5;
};

class PrefixAwareBalancer {
 public:
  // `blocks_per_replica`: how many prompt blocks each replica's record keeps (its KV pool size).
  PrefixAwareBalancer(int replicas, int block_size, int64_t blocks_per_replica,
                      BalancerOptions options = {});

  // The replica for this prompt given each replica's current load; records the choice.
  int route(std::span<const int32_t> prompt, std::string_view cache_salt,
            std::span<const int> loads);
  // How many leading full blocks of the prompt `replica` is believed to hold.
  int64_t cached_blocks(int replica, std::span<const int32_t> prompt,
                        std::string_view cache_salt) const;

 private:
  struct Record {
    std::list<BlockHash> order;  // most recent first
    std::unordered_map<BlockHash, std::list<BlockHash>::iterator, BlockHashHasher> where;
  };
  std::vector<BlockHash> chain(std::span<const int32_t> prompt, std::string_view cache_salt) const;
  int64_t matched(const Record& record, const std::vector<BlockHash>& hashes) const;
  void remember(Record& record, const std::vector<BlockHash>& hashes);

  int block_size_;
  int64_t capacity_;
  BalancerOptions options_;
  std::vector<Record> records_;
};

}  // namespace locus
