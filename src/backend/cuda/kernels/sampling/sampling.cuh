// The sampling kernel: one CTA per row turns f32 logits into one token id exactly as the CPU
// sampler does (sampling/logits_processors.cc). It never writes the logits; the only output is
// out[row]. Only sampling.cu includes this header.
//
// Per sampled row (greedy rows are one argmax pass):
//   P1  max of the temperature-scaled row.
//   P2  (top_k or top_p only) a coarse histogram over bins of (max - x), 1/64 wide: exact counts,
//       f32 masses. It locates a window of bins that must hold the cut: [0, bin of the k-th] for
//       top_k, the bins where the approximate cumulative mass crosses top_p * total (with slack)
//       for top_p alone.
//   P3  gathers the window (at most kWindowCapacity entries) into shared memory, sorts it by
//       (logit desc, id asc) -- the CPU's strict order -- and finds the cut exactly there, with
//       f64 prefix masses. A window that is too large, or a mass check that fails, falls back to
//       an exact-key radix descent over the whole row (more passes; rare: massive ties or flat
//       rows with a window of more than 8192 tokens).
//   P4  the draw: each warp sums the kept mass of its contiguous id segment (f64), the block
//       scans the 32 sums, and the warp whose segment crosses u * total walks it in id order.
// The kept set is {finite x >= min_p threshold} intersected with the prefix of (logit desc,
// id asc) ending at the cut (key, id), so ties at the top_p boundary keep only the lowest ids.
#pragma once

#include <cuda_runtime.h>
#include <math_constants.h>

#include <climits>
#include <cstdint>

#include "backend/cuda/kernels/sampling/sampling_launch.h"

namespace locus::cuda::sampling {
namespace {

constexpr int kThreads = 1024;
constexpr int kWarps = kThreads / 32;
// Same value as locus::kGreedyTemperatureEpsilon (sampling/sampling_params.h).
constexpr float kGreedyTemperatureEpsilon = 1e-5f;

constexpr int kCoarseBins = 2048;
constexpr float kCoarseBinsPerUnit = 64.0f;  // bins cover max - x in [0, 32); the last is open
constexpr int kWindowCapacity = 8192;
constexpr int kRadixBins = 256;
// Relative slack on the f32 bin masses when locating the top_p window. The window is checked
// afterwards with exact f64 sums, so the slack only trades window size against fallbacks.
constexpr double kMassSlack = 1e-3;

// Dynamic shared memory, one union over the phases: coarse histogram (16 KB), sorted window
// (64 KB), or per-warp radix histograms of the fallback (32 KB counts + 64 KB masses).
constexpr size_t kSharedBytes =
    static_cast<size_t>(kWarps) * kRadixBins * (sizeof(uint32_t) + sizeof(double));
static_assert(kSharedBytes >= kWindowCapacity * sizeof(uint64_t));
static_assert(kSharedBytes >= kCoarseBins * (sizeof(uint32_t) + sizeof(float)));

// Order-preserving key: a < b (as floats, NaN aside) iff key(a) < key(b); -0 and +0 are equal.
__device__ __forceinline__ uint32_t order_key(float x) {
  const uint32_t bits = __float_as_uint(x == 0.0f ? 0.0f : x);
  return (bits & 0x80000000u) != 0 ? ~bits : (bits | 0x80000000u);
}
__device__ __forceinline__ float key_value(uint32_t key) {
  return __uint_as_float((key & 0x80000000u) != 0 ? (key & 0x7fffffffu) : ~key);
}

// Window entries sort descending as (key, then lower id first) in one u64; 0 is a pad that sorts
// last (every finite key is > 0).
__device__ __forceinline__ uint64_t pack_entry(uint32_t key, int id) {
  return (static_cast<uint64_t>(key) << 32) | (0xffffffffu - static_cast<uint32_t>(id));
}
__device__ __forceinline__ uint32_t entry_key(uint64_t e) {
  return static_cast<uint32_t>(e >> 32);
}
__device__ __forceinline__ int entry_id(uint64_t e) {
  return static_cast<int>(0xffffffffu - static_cast<uint32_t>(e));
}

// ---- block-wide reductions (kThreads threads; every thread gets the result) ------------------

struct Scratch {
  double d[kWarps];
  float f[kWarps];
  int i[kWarps];
  int window_count;
  int best_index;
  uint32_t prefix;
  int count_above;
  double mass_above;
  double need;
  int digit_count;
};

template <typename T, typename Op>
__device__ __forceinline__ T warp_reduce(T v, Op op) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2)
    v = op(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

template <typename T, typename Op>
__device__ T block_reduce(T v, Op op, T* partial) {
  v = warp_reduce(v, op);
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = v;
  __syncthreads();
  T total = partial[0];
  for (int w = 1; w < kWarps; ++w)
    total = op(total, partial[w]);
  __syncthreads();  // partial is reused by the next call
  return total;
}

struct SumOp {
  template <typename T>
  __device__ T operator()(T a, T b) const {
    return a + b;
  }
};
struct MaxOp {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
  __device__ int operator()(int a, int b) const { return max(a, b); }
};
struct MinOp {
  __device__ int operator()(int a, int b) const { return min(a, b); }
};

// Exclusive prefix sum over the block in thread order; *total gets the sum of all.
template <typename T>
__device__ T block_exclusive_scan(T v, T* partial, T* total) {
  const int lane = threadIdx.x % 32;
  T inclusive = v;
#pragma unroll
  for (int offset = 1; offset < 32; offset *= 2) {
    const T other = __shfl_up_sync(0xffffffffu, inclusive, offset);
    if (lane >= offset) inclusive += other;
  }
  if (lane == 31) partial[threadIdx.x / 32] = inclusive;
  __syncthreads();
  T warp_offset = T(0);
  T sum = T(0);
  for (int w = 0; w < kWarps; ++w) {
    if (w == static_cast<int>(threadIdx.x / 32)) warp_offset = sum;
    sum += partial[w];
  }
  __syncthreads();
  *total = sum;
  return warp_offset + inclusive - v;
}

// ---- the row --------------------------------------------------------------------------------

struct Row {
  const float* logits;
  int vocab;
  bool scale;  // temperature != 1 (the CPU skips the multiply then)
  float inv_temperature;
  float max_logit;
  float min_p_threshold;  // -inf when min_p is off

  // __fmul_rn: never contracted into an FMA with a later subtraction, so x matches the CPU's.
  __device__ __forceinline__ float scaled(float v) const {
    return scale ? __fmul_rn(v, inv_temperature) : v;
  }
  // In the set min_p leaves (finite and not below the threshold; NaN never is).
  __device__ __forceinline__ bool survives_min_p(float x) const {
    return x > -CUDART_INF_F && x >= min_p_threshold;
  }
  __device__ __forceinline__ float weight(float x) const { return expf(x - max_logit); }
  __device__ __forceinline__ int coarse_bin(float x) const {
    const float d = max_logit - x;
    return d < kCoarseBins / kCoarseBinsPerUnit ? static_cast<int>(d * kCoarseBinsPerUnit)
                                                : kCoarseBins - 1;
  }
};

// Calls f(id, raw logit) for every entry; thread t sees its ids in increasing order. float4
// loads over the 16-byte-aligned body, scalar head and tail.
template <typename F>
__device__ __forceinline__ void for_each_logit(const float* row, int vocab, F&& f) {
  const int misalign = static_cast<int>((reinterpret_cast<uintptr_t>(row) / sizeof(float)) & 3);
  const int head = min(vocab, (4 - misalign) & 3);
  if (static_cast<int>(threadIdx.x) < head) f(static_cast<int>(threadIdx.x), row[threadIdx.x]);
  const int body = (vocab - head) / 4;
  const float4* vec = reinterpret_cast<const float4*>(row + head);
#pragma unroll 4
  for (int j = threadIdx.x; j < body; j += kThreads) {
    const float4 v = __ldg(vec + j);
    const int i = head + 4 * j;
    f(i, v.x);
    f(i + 1, v.y);
    f(i + 2, v.z);
    f(i + 3, v.w);
  }
  for (int i = head + 4 * body + threadIdx.x; i < vocab; i += kThreads)
    f(i, row[i]);
}

// Index of the largest raw logit, ties to the lowest id (locus::argmax); NaN never wins.
__device__ int block_argmax(const float* row, int vocab, Scratch& s) {
  float best = -CUDART_INF_F;
  int best_id = INT_MAX;
  for_each_logit(row, vocab, [&](int i, float v) {
    if (v > best || (v == best && i < best_id)) {
      best = v;
      best_id = i;
    }
  });
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) {
    const float other = __shfl_xor_sync(0xffffffffu, best, offset);
    const int other_id = __shfl_xor_sync(0xffffffffu, best_id, offset);
    if (other > best || (other == best && other_id < best_id)) {
      best = other;
      best_id = other_id;
    }
  }
  const int warp = threadIdx.x / 32;
  if (threadIdx.x % 32 == 0) {
    s.f[warp] = best;
    s.i[warp] = best_id;
  }
  __syncthreads();
  best = s.f[0];
  best_id = s.i[0];
  for (int w = 1; w < kWarps; ++w) {
    if (s.f[w] > best || (s.f[w] == best && s.i[w] < best_id)) {
      best = s.f[w];
      best_id = s.i[w];
    }
  }
  __syncthreads();
  return best_id == INT_MAX ? 0 : best_id;  // all NaN: the CPU returns 0 as well
}

// The cut: kept iff key > cut_key, or key == cut_key and id <= cut_id.
struct Cut {
  bool active = false;
  uint32_t key = 0;
  int id = INT_MAX;
  __device__ __forceinline__ bool keeps(uint32_t k, int i) const {
    return !active || k > key || (k == key && i <= id);
  }
};

// ---- fast path: coarse histogram, then an exactly sorted window in shared memory -------------

// Bitonic sort of n (a power of two) u64 entries, descending.
__device__ void sort_descending(uint64_t* entries, int n) {
  for (int size = 2; size <= n; size *= 2) {
    for (int stride = size / 2; stride > 0; stride /= 2) {
      for (int i = threadIdx.x; i < n / 2; i += kThreads) {
        const int lo = 2 * i - (i & (stride - 1));
        const int hi = lo + stride;
        const bool descending = (lo & size) == 0;
        const uint64_t a = entries[lo];
        const uint64_t b = entries[hi];
        if ((a < b) == descending) {
          entries[lo] = b;
          entries[hi] = a;
        }
      }
      __syncthreads();
    }
  }
}

// Finds the cut from the window; returns false when the window cannot hold it (the caller then
// takes the exact radix fallback).
__device__ bool window_cut(const Row& row, int top_k, float top_p, bool use_top_k, bool use_top_p,
                           unsigned char* shared, Scratch& s, Cut* cut) {
  uint32_t* bin_count = reinterpret_cast<uint32_t*>(shared);
  float* bin_mass = reinterpret_cast<float*>(bin_count + kCoarseBins);
  for (int b = threadIdx.x; b < kCoarseBins; b += kThreads) {
    bin_count[b] = 0;
    bin_mass[b] = 0.0f;
  }
  __syncthreads();
  // P2. The open last bin (max - x >= 32, often most of the row at low temperature) is counted
  // in registers: one hot shared address would serialize every warp.
  double total = 0.0;
  int far_count = 0;
  float far_mass = 0.0f;
  for_each_logit(row.logits, row.vocab, [&](int, float v) {
    const float x = row.scaled(v);
    if (!row.survives_min_p(x)) return;
    const float w = row.weight(x);
    total += static_cast<double>(w);
    const int b = row.coarse_bin(x);
    if (b == kCoarseBins - 1) {
      ++far_count;
      far_mass += w;
    } else {
      atomicAdd(&bin_count[b], 1u);
      atomicAdd(&bin_mass[b], w);
    }
  });
  total = block_reduce(total, SumOp{}, s.d);
  far_count = block_reduce(far_count, SumOp{}, s.i);
  far_mass = block_reduce(far_mass, SumOp{}, s.f);
  if (threadIdx.x == 0) {
    bin_count[kCoarseBins - 1] += static_cast<uint32_t>(far_count);
    bin_mass[kCoarseBins - 1] += far_mass;
  }
  __syncthreads();

  // Cumulative counts and masses: thread t owns bins 2t and 2t + 1.
  static_assert(kCoarseBins == 2 * kThreads);
  const int b0 = 2 * threadIdx.x;
  const int c0 = static_cast<int>(bin_count[b0]);
  const int c1 = static_cast<int>(bin_count[b0 + 1]);
  const double m0 = bin_mass[b0];
  const double m1 = bin_mass[b0 + 1];
  int survivors = 0;
  double approx_total = 0.0;
  const int count_before = block_exclusive_scan(c0 + c1, s.i, &survivors);
  const double mass_before = block_exclusive_scan(m0 + m1, s.d, &approx_total);
  const int cum_count[2] = {count_before + c0, count_before + c0 + c1};
  const double cum_mass[2] = {mass_before + m0, mass_before + m0 + m1};

  // top_k with k >= survivors keeps them all, like the CPU's k-th largest of -inf.
  const bool top_k_cuts = use_top_k && top_k < survivors;
  if (!top_k_cuts && !use_top_p) return true;  // *cut stays inactive

  // The window [lo, hi] of bins, and the exact mass above it (top_p alone).
  int lo = 0;
  int hi = kCoarseBins - 1;
  double target = 0.0;
  if (top_k_cuts) {
    int first = INT_MAX;
    for (int j = 1; j >= 0; --j)
      if (cum_count[j] >= top_k) first = b0 + j;
    hi = block_reduce(first, MinOp{}, s.i);
  } else {
    target = static_cast<double>(top_p) * total;
    int first_lo = kCoarseBins - 1;
    int first_hi = kCoarseBins - 1;
    for (int j = 1; j >= 0; --j) {
      if (cum_mass[j] * (1.0 + kMassSlack) >= target) first_lo = b0 + j;
      if (cum_mass[j] * (1.0 - kMassSlack) >= target) first_hi = b0 + j;
    }
    lo = block_reduce(first_lo, MinOp{}, s.i);
    hi = block_reduce(first_hi, MinOp{}, s.i);
  }
  // Every thread knows the window's count from the scan: the owner of bin hi (and lo) shares it.
  if (b0 == (hi & ~1)) s.window_count = cum_count[hi & 1];
  __syncthreads();
  int window_count = s.window_count;
  __syncthreads();
  if (lo > 0) {
    if (b0 == ((lo - 1) & ~1)) s.window_count = cum_count[(lo - 1) & 1];
    __syncthreads();
    window_count -= s.window_count;
    __syncthreads();
  }
  if (window_count > kWindowCapacity) return false;

  // P3: gather the window (warp-aggregated appends), and the exact mass above it.
  uint64_t* entries = reinterpret_cast<uint64_t*>(shared);  // the histogram is dead from here
  if (threadIdx.x == 0) s.window_count = 0;
  __syncthreads();
  double mass_above = 0.0;
  const int lane = threadIdx.x % 32;
  // A warp-uniform trip count so that every lane joins the ballot.
  const int padded = (row.vocab + kThreads - 1) / kThreads * kThreads;
  for (int i = threadIdx.x; i < padded; i += kThreads) {
    bool in_window = false;
    uint64_t entry = 0;
    if (i < row.vocab) {
      const float x = row.scaled(row.logits[i]);
      if (row.survives_min_p(x)) {
        const int b = row.coarse_bin(x);
        if (b < lo) mass_above += static_cast<double>(row.weight(x));
        in_window = b >= lo && b <= hi;
        entry = pack_entry(order_key(x), i);
      }
    }
    const unsigned ballot = __ballot_sync(0xffffffffu, in_window);
    if (ballot == 0) continue;
    int base = 0;
    if (lane == 0) base = atomicAdd(&s.window_count, __popc(ballot));
    base = __shfl_sync(0xffffffffu, base, 0);
    if (in_window) entries[base + __popc(ballot & ((1u << lane) - 1))] = entry;
  }
  mass_above = block_reduce(mass_above, SumOp{}, s.d);
  const int n = s.window_count;  // read after block_reduce's barriers
  int padded_n = 1;
  while (padded_n < n)
    padded_n *= 2;
  for (int j = n + threadIdx.x; j < padded_n; j += kThreads)
    entries[j] = 0;
  __syncthreads();
  sort_descending(entries, padded_n);

  // The top_k cut, and the survivors of it: a prefix of the sorted window.
  int kept = n;
  if (top_k_cuts) {
    // The window is bins [0, hi], so the k-th largest overall is the window's k-th.
    const uint32_t kth_key = entry_key(entries[top_k - 1]);
    cut->active = true;
    cut->key = kth_key;
    cut->id = INT_MAX;
    int last = -1;
    for (int j = threadIdx.x; j < n; j += kThreads) {
      if (entry_key(entries[j]) >= kth_key && (j + 1 == n || entry_key(entries[j + 1]) < kth_key))
        last = j;
    }
    kept = block_reduce(last, MaxOp{}, s.i) + 1;
    if (!use_top_p) return true;
  }

  // top_p over the survivors: the first prefix (in sorted order, after everything above the
  // window) whose mass reaches top_p * total. Thread t owns sorted positions [t*per, t*per+per).
  const int per = (kept + kThreads - 1) / kThreads;
  const int begin = min(kept, static_cast<int>(threadIdx.x) * per);
  const int end = min(kept, begin + per);
  double local = 0.0;
  for (int j = begin; j < end; ++j)
    local += static_cast<double>(row.weight(key_value(entry_key(entries[j]))));
  double window_mass = 0.0;
  const double before = block_exclusive_scan(local, s.d, &window_mass);
  if (top_k_cuts) target = static_cast<double>(top_p) * window_mass;
  // Something above the window already reaches the target: the slack was too small.
  if (lo > 0 && mass_above >= target) return false;
  int crossing = INT_MAX;
  double cumulative = mass_above + before;
  for (int j = begin; j < end; ++j) {
    cumulative += static_cast<double>(row.weight(key_value(entry_key(entries[j]))));
    if (cumulative >= target) {
      crossing = j;
      break;
    }
  }
  crossing = block_reduce(crossing, MinOp{}, s.i);
  if (crossing == INT_MAX) {
    // The CPU keeps everything when rounding leaves the target unreached; that is only this
    // window's last entry when nothing lies below the window.
    if (!top_k_cuts && hi != kCoarseBins - 1) return false;
    crossing = kept - 1;
  }
  cut->active = true;
  cut->key = entry_key(entries[crossing]);
  cut->id = entry_id(entries[crossing]);
  __syncthreads();  // entries are dead after this; the caller may reuse the shared memory
  return true;
}

// ---- fallback: exact-key radix descent over the whole row -----------------------------------

struct Descent {
  uint32_t key;       // the selected key
  double mass_above;  // mass of the set's entries with a larger key
  int count_equal;    // entries of the set with exactly this key
  double target;      // by mass: fraction * total mass of the set
};

// Over the set {survives min_p, key >= lower_key}, walking keys from the largest down: the key
// at which the running count reaches `count_need` (by_mass false), or the running mass reaches
// fraction * (mass of the set) (by_mass true). Four passes of 8-bit digits; per-warp histograms
// (f64 masses) keep atomics on distinct addresses across warps.
__device__ Descent radix_descend(const Row& row, uint32_t lower_key, bool by_mass, int count_need,
                                 float fraction, unsigned char* shared, Scratch& s) {
  uint32_t* counts = reinterpret_cast<uint32_t*>(shared);
  double* masses = reinterpret_cast<double*>(counts + kWarps * kRadixBins);
  const int warp = threadIdx.x / 32;
  if (threadIdx.x == 0) {
    s.prefix = 0;
    s.count_above = 0;
    s.mass_above = 0.0;
    s.need = static_cast<double>(count_need);
  }
  for (int level = 0; level < 4; ++level) {
    const int shift = 24 - 8 * level;
    for (int j = threadIdx.x; j < kWarps * kRadixBins; j += kThreads) {
      counts[j] = 0;
      masses[j] = 0.0;
    }
    __syncthreads();
    const uint32_t prefix = s.prefix;
    for_each_logit(row.logits, row.vocab, [&](int, float v) {
      const float x = row.scaled(v);
      if (!row.survives_min_p(x)) return;
      const uint32_t key = order_key(x);
      if (key < lower_key) return;
      if (level > 0 && (key >> (shift + 8)) != (prefix >> (shift + 8))) return;
      const int digit = static_cast<int>((key >> shift) & 0xffu);
      atomicAdd(&counts[warp * kRadixBins + digit], 1u);
      if (by_mass)
        atomicAdd(&masses[warp * kRadixBins + digit], static_cast<double>(row.weight(x)));
    });
    __syncthreads();
    if (threadIdx.x < kRadixBins) {  // merge in a fixed warp order into warp 0's row
      uint32_t c = 0;
      double m = 0.0;
      for (int w = 0; w < kWarps; ++w) {
        c += counts[w * kRadixBins + threadIdx.x];
        m += masses[w * kRadixBins + threadIdx.x];
      }
      counts[threadIdx.x] = c;
      masses[threadIdx.x] = m;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      if (level == 0 && by_mass) {
        double total = 0.0;
        for (int d = 0; d < kRadixBins; ++d)
          total += masses[d];
        s.need = static_cast<double>(fraction) * total;
      }
      int chosen = -1;
      int lowest_nonempty = -1;
      double mass = s.mass_above;
      int count = s.count_above;
      for (int d = kRadixBins - 1; d >= 0; --d) {
        if (counts[d] == 0) continue;
        lowest_nonempty = d;
        const bool reaches = by_mass ? mass + masses[d] >= s.need
                                     : count + static_cast<int>(counts[d]) >= count_need;
        if (reaches) {
          chosen = d;
          break;
        }
        mass += masses[d];
        count += static_cast<int>(counts[d]);
      }
      if (chosen < 0) {  // rounding left the mass short: the CPU keeps everything
        chosen = lowest_nonempty;
        mass -= masses[chosen];
        count -= static_cast<int>(counts[chosen]);
      }
      s.prefix |= static_cast<uint32_t>(chosen) << shift;
      s.mass_above = mass;
      s.count_above = count;
      s.digit_count = static_cast<int>(counts[chosen]);
    }
    __syncthreads();
  }
  Descent result{s.prefix, s.mass_above, s.digit_count, s.need};
  __syncthreads();
  return result;
}

// The id of the rank-th (1-based) entry, in id order, with x in the min_p set and key == key.
// Warp w owns ids [w * segment, (w + 1) * segment).
__device__ int nth_id_with_key(const Row& row, uint32_t key, int rank, Scratch& s) {
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  const int segment = (row.vocab + kWarps - 1) / kWarps;
  const int begin = warp * segment;
  const int end = min(row.vocab, begin + segment);
  auto matches = [&](int i) {
    if (i >= end) return false;
    const float x = row.scaled(row.logits[i]);
    return row.survives_min_p(x) && order_key(x) == key;
  };
  int count = 0;
  for (int base = begin; base < end; base += 32)
    count += __popc(__ballot_sync(0xffffffffu, matches(base + lane)));
  if (lane == 0) s.i[warp] = count;
  __syncthreads();
  int before = 0;
  for (int w = 0; w < warp; ++w)
    before += s.i[w];
  __syncthreads();
  if (lane == 0) s.best_index = INT_MAX;
  __syncthreads();
  if (before < rank && rank <= before + count) {
    int seen = before;
    for (int base = begin; base < end; base += 32) {
      unsigned ballot = __ballot_sync(0xffffffffu, matches(base + lane));
      const int here = __popc(ballot);
      if (seen + here >= rank) {
        for (int skip = rank - seen - 1; skip > 0; --skip)
          ballot &= ballot - 1;
        if (lane == 0) s.best_index = base + __ffs(ballot) - 1;
        break;
      }
      seen += here;
    }
  }
  __syncthreads();
  const int id = s.best_index;
  __syncthreads();
  return id;
}

__device__ Cut radix_cut(const Row& row, int top_k, float top_p, bool use_top_k, bool use_top_p,
                         unsigned char* shared, Scratch& s) {
  Cut cut;
  uint32_t lower_key = 0;
  if (use_top_k) {
    const Descent kth = radix_descend(row, 0, false, top_k, 0.0f, shared, s);
    // Fewer than k survivors: the descent ends on the smallest, which keeps them all anyway.
    lower_key = kth.key;
    cut.active = true;
    cut.key = kth.key;
  }
  if (!use_top_p) return cut;
  const Descent boundary = radix_descend(row, lower_key, true, 0, top_p, shared, s);
  // Ties at the boundary value: keep the fewest lowest ids whose mass reaches the target.
  const double w = static_cast<double>(row.weight(key_value(boundary.key)));
  int needed = boundary.count_equal;
  if (w > 0.0) {
    const double exact = ceil((boundary.target - boundary.mass_above) / w);
    needed = static_cast<int>(fmin(fmax(exact, 1.0), static_cast<double>(boundary.count_equal)));
    while (needed > 1 && boundary.mass_above + (needed - 1) * w >= boundary.target)
      --needed;
    while (needed < boundary.count_equal && boundary.mass_above + needed * w < boundary.target)
      ++needed;
  }
  cut.active = true;
  cut.key = boundary.key;
  cut.id = needed < boundary.count_equal ? nth_id_with_key(row, boundary.key, needed, s) : INT_MAX;
  return cut;
}

// ---- the draw -------------------------------------------------------------------------------

// sample_from_logits over the kept set: the first id (ascending) whose cumulative weight
// exceeds u * total, else the last kept id. Weights are f32 expf, sums f64 (as the CPU's);
// warps own contiguous id segments, so only the summation grouping differs from the CPU's.
__device__ int draw(const Row& row, const Cut& cut, float u, Scratch& s) {
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  const int segment = (row.vocab + kWarps - 1) / kWarps;
  const int begin = warp * segment;
  const int end = min(row.vocab, begin + segment);
  auto kept_weight = [&](int i) {
    if (i >= end) return 0.0f;
    const float x = row.scaled(row.logits[i]);
    if (!row.survives_min_p(x) || !cut.keeps(order_key(x), i)) return 0.0f;
    return row.weight(x);
  };
  double mass = 0.0;
  int last_kept = -1;
#pragma unroll 4
  for (int i = begin + lane; i < end; i += 32) {
    const float w = kept_weight(i);
    mass += static_cast<double>(w);
    if (w > 0.0f) last_kept = i;
  }
  mass = warp_reduce(mass, SumOp{});
  last_kept = warp_reduce(last_kept, MaxOp{});
  if (lane == 0) {
    s.d[warp] = mass;
    s.i[warp] = last_kept;
  }
  __syncthreads();
  double before = 0.0;
  double total = 0.0;
  int overall_last = -1;
  for (int w = 0; w < kWarps; ++w) {
    if (w == warp) before = total;
    total += s.d[w];
    overall_last = max(overall_last, s.i[w]);
  }
  const double target = static_cast<double>(u) * total;
  if (threadIdx.x == 0) s.best_index = overall_last;
  __syncthreads();
  if (before <= target && target < before + mass) {
    // This warp's segment crosses: walk it 32 ids at a time with an inclusive warp scan.
    double cumulative = before;
    int found = -1;
    for (int base = begin; base < end && found < 0; base += 32) {
      const float w = kept_weight(base + lane);
      double inclusive = static_cast<double>(w);
#pragma unroll
      for (int offset = 1; offset < 32; offset *= 2) {
        const double other = __shfl_up_sync(0xffffffffu, inclusive, offset);
        if (lane >= offset) inclusive += other;
      }
      const unsigned crossed =
          __ballot_sync(0xffffffffu, w > 0.0f && cumulative + inclusive > target);
      if (crossed != 0) found = base + __ffs(crossed) - 1;
      cumulative += __shfl_sync(0xffffffffu, inclusive, 31);
    }
    // Rounding between the segment sum and the walk: the segment's last kept id.
    if (lane == 0) s.best_index = found >= 0 ? found : last_kept;
  }
  __syncthreads();
  return s.best_index;
}

// ---- the kernel -----------------------------------------------------------------------------

__global__ void __launch_bounds__(kThreads)
    sample_rows_kernel(const float* logits, int64_t ld, int vocab, const SampleRowParams* params,
                       int32_t* out) {
  extern __shared__ __align__(16) unsigned char shared[];
  __shared__ Scratch s;
  const float* row_logits = logits + static_cast<int64_t>(blockIdx.x) * ld;
  const SampleRowParams p = params[blockIdx.x];
  if (p.temperature < kGreedyTemperatureEpsilon) {
    const int token = block_argmax(row_logits, vocab, s);
    if (threadIdx.x == 0) out[blockIdx.x] = token;
    return;
  }

  Row row;
  row.logits = row_logits;
  row.vocab = vocab;
  row.scale = p.temperature != 1.0f;
  row.inv_temperature = 1.0f / p.temperature;
  row.max_logit = -CUDART_INF_F;
  row.min_p_threshold = -CUDART_INF_F;
  float local_max = -CUDART_INF_F;
  for_each_logit(row_logits, vocab,
                 [&](int, float v) { local_max = fmaxf(local_max, row.scaled(v)); });
  row.max_logit = block_reduce(local_max, MaxOp{}, s.f);
  if (row.max_logit == -CUDART_INF_F) {  // everything masked: nothing to draw from
    const int token = block_argmax(row_logits, vocab, s);
    if (threadIdx.x == 0) out[blockIdx.x] = token;
    return;
  }
  if (p.min_p > 0.0f) {
    // log in f64 rounded to f32: the correctly rounded logf, which glibc's matches but for
    // rare last-ulp cases.
    row.min_p_threshold = row.max_logit + static_cast<float>(log(static_cast<double>(p.min_p)));
  }
  const bool use_top_k = p.top_k > 0 && p.top_k < vocab;
  const bool use_top_p = p.top_p < 1.0f;
  Cut cut;
  if (use_top_k || use_top_p) {
    if (!window_cut(row, p.top_k, p.top_p, use_top_k, use_top_p, shared, s, &cut)) {
      __syncthreads();
      cut = radix_cut(row, p.top_k, p.top_p, use_top_k, use_top_p, shared, s);
    }
  }
  const int token = draw(row, cut, p.u, s);
  if (threadIdx.x == 0) out[blockIdx.x] = token;
}

}  // namespace
}  // namespace locus::cuda::sampling
