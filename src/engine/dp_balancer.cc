#include "engine/dp_balancer.h"

#include <algorithm>

namespace locus {

PrefixAwareBalancer::PrefixAwareBalancer(int replicas, int block_size, int64_t blocks_per_replica,
                                         BalancerOptions options)
    : block_size_(std::max(block_size, 1)),
      capacity_(std::max<int64_t>(blocks_per_replica, 1)),
      options_(options),
      records_(static_cast<size_t>(std::max(replicas, 1))) {}

std::vector<BlockHash> PrefixAwareBalancer::chain(std::span<const int32_t> prompt,
                                                  std::string_view cache_salt) const {
  std::vector<BlockHash> hashes;
  BlockHash parent = root_block_hash(cache_salt_key(cache_salt));
  const size_t full = prompt.size() / static_cast<size_t>(block_size_);
  hashes.reserve(full);
  for (size_t b = 0; b < full; ++b) {
    parent = hash_block_tokens(parent, prompt.subspan(b * static_cast<size_t>(block_size_),
                                                      static_cast<size_t>(block_size_)));
    hashes.push_back(parent);
  }
  return hashes;
}

int64_t PrefixAwareBalancer::matched(const Record& record,
                                     const std::vector<BlockHash>& hashes) const {
  int64_t n = 0;
  for (const BlockHash& h : hashes) {
    if (!record.where.contains(h)) break;
    ++n;
  }
  return n;
}

void PrefixAwareBalancer::remember(Record& record, const std::vector<BlockHash>& hashes) {
  for (const BlockHash& h : hashes) {
    auto it = record.where.find(h);
    if (it != record.where.end()) {
      record.order.splice(record.order.begin(), record.order, it->second);
      continue;
    }
    record.order.push_front(h);
    record.where.emplace(h, record.order.begin());
    if (static_cast<int64_t>(record.order.size()) > capacity_) {
      record.where.erase(record.order.back());
      record.order.pop_back();
    }
  }
}

int PrefixAwareBalancer::route(std::span<const int32_t> prompt, std::string_view cache_salt,
                               std::span<const int> loads) {
  const int n = static_cast<int>(records_.size());
  auto load = [&](int r) { return r < static_cast<int>(loads.size()) ? loads[r] : 0; };
  int idlest = 0;
  int busiest = 0;
  for (int r = 1; r < n; ++r) {
    if (load(r) < load(idlest)) idlest = r;
    if (load(r) > load(busiest)) busiest = r;
  }
  const std::vector<BlockHash> hashes = chain(prompt, cache_salt);
  const bool imbalanced = load(busiest) - load(idlest) > options_.abs_threshold &&
                          static_cast<double>(load(busiest)) >
                              options_.rel_threshold * static_cast<double>(load(idlest));
  int pick = idlest;
  if (!imbalanced) {
    int64_t best = -1;
    for (int r = 0; r < n; ++r) {
      const int64_t m = matched(records_[static_cast<size_t>(r)], hashes);
      if (m > best || (m == best && load(r) < load(pick))) {
        best = m;
        pick = r;
      }
    }
  }
  remember(records_[static_cast<size_t>(pick)], hashes);
  return pick;
}

int64_t PrefixAwareBalancer::cached_blocks(int replica, std::span<const int32_t> prompt,
                                           std::string_view cache_salt) const {
  if (replica < 0 || replica >= static_cast<int>(records_.size())) return 0;
  return matched(records_[static_cast<size_t>(replica)], chain(prompt, cache_salt));
}

}  // namespace locus
