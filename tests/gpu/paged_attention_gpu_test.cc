// Paged attention kernels (backend/cuda/kernels/attention) against the CPU reference backend:
// decode, prefill, chunked prefill mixed with decode, GQA groups, MLA-as-MQA over a latent cache
// (V inside K), block sizes 1/16/32, sliding windows, shuffled block tables and over-sized
// graph bounds. Inputs are rounded to bf16 first so both sides see the same values; the GPU
// output is poisoned with NaN before each launch. SKIPPED where no GPU is present.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <utility>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/device.h"
#include "core/convert.h"

#ifdef LOCUS_HAS_CUDA
#include <cuda_runtime_api.h>

#include "backend/cuda/kernels/attention/attention_launch.h"
#include "gpu/late_writer.h"
#endif

namespace locus {
namespace {

#ifndef LOCUS_HAS_CUDA

TEST(GpuPagedAttention, NeedsCuda) {
  GTEST_SKIP() << "built without CUDA";
}

#else

bool has_gpu(std::string& reason) {
  DeviceReport report = query_devices();
  reason = report.cuda_unavailable_reason;
  return !report.gpus.empty();
}

struct Case {
  const char* name = "";
  int q_heads = 0;
  int kv_heads = 0;
  int head_dim = 0;
  int v_head_dim = 0;
  int block_size = 16;
  std::vector<std::pair<int, int>> seqs;  // (seq_len, q_len): the q_len new tokens are last
  int64_t window = 0;                     // 0 = full causal
  bool v_in_k = false;                    // MLA: V is the first v_head_dim dims of K
  int bound_factor = 1;  // grid bounds = factor x the true max_query_len / max_seq_len
  uint64_t seed = 1;
  // q and the new tokens' K/V rows arrive late: they hold NaN until a kernel launched just
  // before the attention (and letting it start at once, PDL) writes them after a delay.
  bool late_writes = false;
};

// A decode batch: n sequences with one new token each and seq_len in [1, max_len].
std::vector<std::pair<int, int>> decode_batch(int n, int max_len, uint64_t seed) {
  std::mt19937 rng(static_cast<uint32_t>(seed));
  std::uniform_int_distribution<int> len(1, max_len);
  std::vector<std::pair<int, int>> seqs;
  for (int i = 0; i < n; ++i)
    seqs.emplace_back(len(rng), 1);
  return seqs;
}

// Normal values rounded to bf16: `values` gets the rounded floats, `bits` their bf16 encoding.
void random_bf16(std::mt19937& rng, size_t n, std::vector<float>& values,
                 std::vector<uint16_t>& bits) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  values.resize(n);
  bits.resize(n);
  for (auto& x : values)
    x = normal(rng);
  ASSERT_TRUE(convert_from_f32(values.data(), DType::kBF16, bits.data(), n).is_ok());
  ASSERT_TRUE(convert_to_f32(DType::kBF16, bits.data(), values.data(), n).is_ok());
}

Tensor host_tensor(const Dims& shape, DType dtype, const void* data, size_t bytes) {
  Tensor t = Tensor::empty(shape, dtype).value();
  if (bytes > 0) std::memcpy(t.raw_data(), data, bytes);
  return t;
}

class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t bytes) {
    if (cudaMalloc(&ptr_, std::max<size_t>(bytes, 16)) != cudaSuccess) ptr_ = nullptr;
  }
  ~DeviceBuffer() {
    if (ptr_) cudaFree(ptr_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* get() const { return ptr_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }

 private:
  void* ptr_ = nullptr;
};

template <typename T>
void upload(const DeviceBuffer& dst, const std::vector<T>& src) {
  ASSERT_NE(dst.get(), nullptr);
  ASSERT_EQ(cudaMemcpy(dst.get(), src.data(), src.size() * sizeof(T), cudaMemcpyHostToDevice),
            cudaSuccess);
}

// Runs one case on the CPU reference and the GPU (once per bound factor: 1 and c.bound_factor)
// and checks rel L2 < 1e-2 with no NaN.
void check_case(const Case& c) {
  SCOPED_TRACE(c.name);
  std::mt19937 rng(static_cast<uint32_t>(c.seed));
  const int num_seqs = static_cast<int>(c.seqs.size());
  const int bs = c.block_size;

  // Shuffled block ids with spare blocks, so only the block table finds each sequence's keys.
  std::vector<int> blocks_needed;
  int total_blocks = 3;
  int width = 1;
  int num_tokens = 0;
  int max_query_len = 0;
  int max_seq_len = 0;
  for (auto [seq_len, q_len] : c.seqs) {
    ASSERT_LE(q_len, seq_len);
    blocks_needed.push_back((seq_len + bs - 1) / bs);
    total_blocks += blocks_needed.back();
    width = std::max(width, blocks_needed.back() + 2);  // -1 padding past each sequence
    num_tokens += q_len;
    max_query_len = std::max(max_query_len, q_len);
    max_seq_len = std::max(max_seq_len, seq_len);
  }
  std::vector<int32_t> ids(static_cast<size_t>(total_blocks));
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng);
  std::vector<int32_t> table(static_cast<size_t>(num_seqs) * static_cast<size_t>(width), -1);
  std::vector<int32_t> qsl = {0};
  std::vector<int32_t> seq_lens;
  std::vector<int64_t> slots;
  size_t next = 0;
  for (int s = 0; s < num_seqs; ++s) {
    for (int b = 0; b < blocks_needed[static_cast<size_t>(s)]; ++b)
      table[static_cast<size_t>(s * width + b)] = ids[next++];
    const auto [seq_len, q_len] = c.seqs[static_cast<size_t>(s)];
    for (int j = seq_len - q_len; j < seq_len; ++j)
      slots.push_back(static_cast<int64_t>(table[static_cast<size_t>(s * width + j / bs)]) * bs +
                      j % bs);
    qsl.push_back(qsl.back() + q_len);
    seq_lens.push_back(seq_len);
  }

  const int d = c.head_dim;
  const int dv = c.v_head_dim;
  const size_t cache_rows = static_cast<size_t>(total_blocks) * bs * c.kv_heads;
  std::vector<float> q, k, v;
  std::vector<uint16_t> q_bits, k_bits, v_bits;
  random_bf16(rng, static_cast<size_t>(num_tokens) * c.q_heads * d, q, q_bits);
  random_bf16(rng, cache_rows * d, k, k_bits);
  if (c.v_in_k) {
    v.resize(cache_rows * dv);
    for (size_t r = 0; r < cache_rows; ++r)
      std::copy_n(k.begin() + static_cast<long>(r * d), dv, v.begin() + static_cast<long>(r * dv));
  } else {
    random_bf16(rng, cache_rows * dv, v, v_bits);
  }

  // CPU reference.
  CpuBackend cpu;
  Tensor q_t = host_tensor({num_tokens, c.q_heads, d}, DType::kF32, q.data(), q.size() * 4);
  Tensor k_t = host_tensor({total_blocks, bs, c.kv_heads, d}, DType::kF32, k.data(), k.size() * 4);
  Tensor v_t = host_tensor({total_blocks, bs, c.kv_heads, dv}, DType::kF32, v.data(), v.size() * 4);
  AttentionMetadata md;
  md.block_size = bs;
  md.query_start_loc = host_tensor({num_seqs + 1}, DType::kI32, qsl.data(), qsl.size() * 4);
  md.seq_lens = host_tensor({num_seqs}, DType::kI32, seq_lens.data(), seq_lens.size() * 4);
  md.block_table = host_tensor({num_seqs, width}, DType::kI32, table.data(), table.size() * 4);
  md.slot_mapping = host_tensor({num_tokens}, DType::kI64, slots.data(), slots.size() * 8);
  md.max_query_len = max_query_len;
  md.max_seq_len = max_seq_len;
  AttentionParams params;
  params.scale = 1.0f / std::sqrt(static_cast<float>(d));
  if (c.window > 0) params.sliding_window = c.window;
  Tensor ref_t = Tensor::empty({num_tokens, c.q_heads, dv}, DType::kF32).value();
  ASSERT_TRUE(cpu.paged_attention(q_t, k_t, v_t, md, params, ref_t).is_ok());
  const float* ref = ref_t.data<float>();
  const size_t out_n = static_cast<size_t>(num_tokens) * c.q_heads * dv;

  // GPU.
  DeviceBuffer q_d(q_bits.size() * 2), k_d(k_bits.size() * 2), v_d(v_bits.size() * 2);
  DeviceBuffer out_d(out_n * 2), qsl_d(qsl.size() * 4), lens_d(seq_lens.size() * 4),
      table_d(table.size() * 4);
  upload(q_d, q_bits);
  upload(k_d, k_bits);
  if (!c.v_in_k) upload(v_d, v_bits);
  upload(qsl_d, qsl);
  upload(lens_d, seq_lens);
  upload(table_d, table);

  // Late writes: the device copies of q and the new K/V rows start as NaN; the correct rows
  // wait in *_src until the late writer copies them.
  const size_t k_row_bytes = static_cast<size_t>(c.kv_heads) * d * 2;
  const size_t v_row_bytes = static_cast<size_t>(c.kv_heads) * dv * 2;
  DeviceBuffer q_src(q_bits.size() * 2), k_src(k_bits.size() * 2), v_src(v_bits.size() * 2),
      slots_d(slots.size() * 8), q_rows_d(static_cast<size_t>(num_tokens) * 8);
  std::vector<uint16_t> q_poison(q_bits.size(), 0xFFFF), k_poison = k_bits, v_poison = v_bits;
  std::vector<gpu_test::RowCopy> copies;
  cudaStream_t stream = nullptr;
  struct StreamOwner {
    cudaStream_t* s;
    ~StreamOwner() {
      if (*s != nullptr) cudaStreamDestroy(*s);
    }
  } stream_owner{&stream};
  if (c.late_writes) {
    upload(q_src, q_bits);
    upload(k_src, k_bits);
    if (!c.v_in_k) upload(v_src, v_bits);
    upload(slots_d, slots);
    std::vector<int64_t> q_rows(static_cast<size_t>(num_tokens));
    std::iota(q_rows.begin(), q_rows.end(), int64_t{0});
    upload(q_rows_d, q_rows);
    for (int64_t slot : slots) {
      std::fill_n(k_poison.begin() + static_cast<long>(slot * c.kv_heads * d), c.kv_heads * d,
                  uint16_t{0xFFFF});
      if (!c.v_in_k)
        std::fill_n(v_poison.begin() + static_cast<long>(slot * c.kv_heads * dv), c.kv_heads * dv,
                    uint16_t{0xFFFF});
    }
    copies.push_back({q_src.get(), q_d.get(), q_rows_d.as<int64_t>(), num_tokens,
                      static_cast<size_t>(c.q_heads) * d * 2});
    copies.push_back({k_src.get(), k_d.get(), slots_d.as<int64_t>(), num_tokens, k_row_bytes});
    if (!c.v_in_k)
      copies.push_back({v_src.get(), v_d.get(), slots_d.as<int64_t>(), num_tokens, v_row_bytes});
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  }

  std::vector<int> factors = {1};
  if (c.bound_factor > 1) factors.push_back(c.bound_factor);
  for (int factor : factors) {
    cuda::PagedAttentionArgs a;
    a.q = q_d.get();
    a.q_head_stride = d;
    a.q_token_stride = static_cast<int64_t>(c.q_heads) * d;
    a.k_cache = k_d.get();
    a.k_head_stride = d;
    a.k_token_stride = static_cast<int64_t>(c.kv_heads) * d;
    a.k_block_stride = a.k_token_stride * bs;
    if (c.v_in_k) {
      a.v_cache = k_d.get();
      a.v_head_stride = a.k_head_stride;
      a.v_token_stride = a.k_token_stride;
      a.v_block_stride = a.k_block_stride;
    } else {
      a.v_cache = v_d.get();
      a.v_head_stride = dv;
      a.v_token_stride = static_cast<int64_t>(c.kv_heads) * dv;
      a.v_block_stride = a.v_token_stride * bs;
    }
    a.out = out_d.get();
    a.query_start_loc = qsl_d.as<int32_t>();
    a.seq_lens = lens_d.as<int32_t>();
    a.block_table = table_d.as<int32_t>();
    a.block_table_stride = width;
    a.num_seqs = num_seqs;
    a.num_tokens = num_tokens;
    a.num_q_heads = c.q_heads;
    a.num_kv_heads = c.kv_heads;
    a.head_dim = d;
    a.v_head_dim = dv;
    a.block_size = bs;
    a.scale = params.scale;
    a.sliding_window = c.window;
    a.max_query_len = max_query_len * factor;
    a.max_seq_len = max_seq_len * factor;
    const size_t ws_bytes = cuda::paged_attention_workspace_bytes(a);
    DeviceBuffer ws(ws_bytes);
    a.workspace = ws.get();
    a.workspace_bytes = ws_bytes;

    // Split-KV merged by the separate kernel, then inside the attention kernel (counters); the
    // counters must be back to zero afterwards, as the next launch (a graph replay) needs them.
    const size_t counter_slots = cuda::paged_attention_counter_slots(a);
    DeviceBuffer counters(std::max<size_t>(counter_slots, 1) * sizeof(int));
    ASSERT_EQ(cudaMemset(counters.get(), 0, std::max<size_t>(counter_slots, 1) * sizeof(int)),
              cudaSuccess);
    for (bool fused : {false, true}) {
      if (fused && counter_slots == 0) continue;
      a.split_counters = fused ? counters.as<int>() : nullptr;
      a.split_counter_slots = fused ? counter_slots : 0;
      ASSERT_EQ(cudaMemset(out_d.get(), 0xFF, out_n * 2), cudaSuccess);  // bf16 NaN everywhere
      if (c.late_writes) {
        upload(q_d, q_poison);
        upload(k_d, k_poison);
        if (!c.v_in_k) upload(v_d, v_poison);
        ASSERT_EQ(gpu_test::launch_late_writer(copies.data(), static_cast<int>(copies.size()),
                                               50000, stream),
                  cudaSuccess);
      }
      ASSERT_EQ(cuda::launch_paged_attention(a, stream), cudaSuccess);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      std::vector<uint16_t> out_bits(out_n);
      ASSERT_EQ(cudaMemcpy(out_bits.data(), out_d.get(), out_n * 2, cudaMemcpyDeviceToHost),
                cudaSuccess);
      std::vector<float> out(out_n);
      ASSERT_TRUE(convert_to_f32(DType::kBF16, out_bits.data(), out.data(), out_n).is_ok());

      double diff = 0.0, norm = 0.0;
      size_t nans = 0;
      for (size_t i = 0; i < out_n; ++i) {
        if (!std::isfinite(out[i])) {
          ++nans;
          continue;
        }
        diff += (static_cast<double>(out[i]) - ref[i]) * (static_cast<double>(out[i]) - ref[i]);
        norm += static_cast<double>(ref[i]) * ref[i];
      }
      const double rel = std::sqrt(diff / std::max(norm, 1e-30));
      std::printf(
          "  %-44s bounds x%d  tokens %5d  workspace %9zu B  %s  rel_l2 %.2e  non-finite %zu\n",
          c.name, factor, num_tokens, ws_bytes, fused ? "in-kernel merge" : "merge kernel  ", rel,
          nans);
      EXPECT_EQ(nans, 0u) << "bounds x" << factor << (fused ? " in-kernel merge" : "");
      EXPECT_LT(rel, 1e-2) << "bounds x" << factor << (fused ? " in-kernel merge" : "");
      if (fused) {
        std::vector<int> left(counter_slots);
        ASSERT_EQ(cudaMemcpy(left.data(), counters.get(), counter_slots * sizeof(int),
                             cudaMemcpyDeviceToHost),
                  cudaSuccess);
        EXPECT_EQ(std::count(left.begin(), left.end(), 0), static_cast<long>(counter_slots))
            << "split counters not reset";
      }
    }
  }
}

#define REQUIRE_GPU()                                                \
  do {                                                               \
    std::string reason;                                              \
    if (!has_gpu(reason)) GTEST_SKIP() << "no CUDA GPU: " << reason; \
  } while (0)

TEST(GpuPagedAttention, DecodeHeadDimsAndGroups) {
  REQUIRE_GPU();
  check_case({"decode d16 g1 bs16", 4, 4, 16, 16, 16, decode_batch(5, 300, 11), 0, false, 1, 1});
  check_case({"decode d32 g4 bs32", 8, 2, 32, 32, 32, decode_batch(9, 700, 12), 0, false, 1, 2});
  check_case({"decode d48 g8 bs1", 16, 2, 48, 48, 1, decode_batch(7, 200, 13), 0, false, 1, 3});
  check_case({"decode d64 g4 bs16", 8, 2, 64, 64, 16, decode_batch(16, 2000, 14), 0, false, 1, 4});
  check_case(
      {"decode d128 g8 bs16 x64", 16, 2, 128, 128, 16, decode_batch(64, 4096, 15), 0, false, 1, 5});
  check_case(
      {"decode d256 g2 bs32", 4, 2, 256, 256, 32, decode_batch(8, 1500, 16), 0, false, 1, 6});
  check_case({"decode d128 g3 (6 q / 2 kv heads)", 6, 2, 128, 128, 16, decode_batch(4, 900, 17), 0,
              false, 1, 7});
  check_case(
      {"decode d40 v24 (pad to 16)", 8, 2, 40, 24, 16, decode_batch(6, 500, 18), 0, false, 1, 8});
}

TEST(GpuPagedAttention, DecodeLongContextManySplits) {
  REQUIRE_GPU();
  check_case({"decode d128 g4 seq 32768", 8, 2, 128, 128, 16, {{32768, 1}}, 0, false, 1, 21});
  check_case({"decode d128 g8 32768 + short",
              16,
              2,
              128,
              128,
              16,
              {{32768, 1}, {3, 1}, {700, 1}},
              0,
              false,
              1,
              22});
  // 18 and 19 splits of one tile each, more than one batch of merge loads (12), so the merge
  // folds in a second batch; at 1153 keys the new key is its tile's first row (no early rows).
  check_case({"decode d128 g8 1152 keys", 32, 4, 128, 128, 16, {{1152, 1}}, 0, false, 1, 23});
  check_case({"decode d128 g8 1153 keys", 32, 4, 128, 128, 16, {{1153, 1}}, 0, false, 1, 24});
  check_case({"decode d64 g4 1100 keys, late writes",
              16,
              4,
              64,
              64,
              16,
              {{1100, 1}},
              0,
              false,
              1,
              25,
              true});
}

TEST(GpuPagedAttention, PrefillHeadDims) {
  REQUIRE_GPU();
  check_case(
      {"prefill d16 g1 bs1", 4, 4, 16, 16, 1, {{1, 1}, {37, 37}, {130, 130}}, 0, false, 1, 31});
  check_case({"prefill d32 g4 bs16", 8, 2, 32, 32, 16, {{200, 200}, {64, 64}}, 0, false, 1, 32});
  check_case({"prefill d48 g8 bs32", 16, 2, 48, 48, 32, {{150, 150}}, 0, false, 1, 33});
  check_case({"prefill d64 g4 bs16", 8, 2, 64, 64, 16, {{333, 333}}, 0, false, 1, 34});
  // Block sizes that are not a power of two: the prefill loaders' division path (shifts
  // otherwise), whole tiles and partial ones, and a continuation chunk (old keys loaded early).
  check_case(
      {"prefill d128 g8 bs24", 32, 4, 128, 128, 24, {{700, 700}, {90, 90}}, 0, false, 1, 61});
  check_case({"prefill d64 g4 bs12 chunk", 8, 2, 64, 64, 12, {{500, 200}}, 0, false, 1, 62});
  check_case({"prefill d128 g4 600 tokens", 8, 2, 128, 128, 16, {{600, 600}}, 0, false, 1, 35});
  check_case({"prefill d128 g8 1..600",
              16,
              2,
              128,
              128,
              16,
              {{1, 1}, {17, 17}, {600, 600}},
              0,
              false,
              1,
              36});
  check_case(
      {"prefill d256 g2 bs16", 4, 2, 256, 256, 16, {{300, 300}, {400, 17}}, 0, false, 1, 37});
  check_case({"prefill d40 v24 g3", 6, 2, 40, 24, 16, {{90, 90}, {50, 7}}, 0, false, 1, 38});
  check_case({"prefill d64 g128 (MQA, 128 heads)",
              128,
              1,
              64,
              64,
              16,
              {{50, 5}, {20, 1}},
              0,
              false,
              1,
              39});
}

TEST(GpuPagedAttention, MixedChunkedPrefillAndDecode) {
  REQUIRE_GPU();
  const std::vector<std::pair<int, int>> mix = {{1000, 1}, {700, 300}, {5, 5}, {2048, 1},
                                                {333, 64}, {64, 64},   {1, 1}, {129, 1}};
  check_case({"mixed d128 g8 bs32", 32, 4, 128, 128, 32, mix, 0, false, 1, 41});
  check_case({"mixed d64 g1 bs1", 4, 4, 64, 64, 1, mix, 0, false, 1, 42});
  check_case({"mixed d128 g8 bs16 window 64", 32, 4, 128, 128, 16, mix, 64, false, 1, 43});
  check_case(
      {"decode d64 g4 window 64", 8, 2, 64, 64, 16, decode_batch(12, 1000, 44), 64, false, 1, 44});
  check_case({"spec decode d128 g4 q_len<=4",
              8,
              2,
              128,
              128,
              16,
              {{100, 4}, {50, 2}, {9, 1}},
              0,
              false,
              1,
              45});
  check_case({"mixed d128 g8 graph bounds x4", 32, 4, 128, 128, 16, mix, 0, false, 4, 46});
  check_case({"decode d128 g8 graph bounds x8", 16, 2, 128, 128, 16, decode_batch(8, 300, 47), 0,
              false, 8, 47});
}

// With PDL the attention kernel starts while the kernel before it still runs, and loads the KV
// tiles of keys older than the step before waiting on it. Here that kernel writes q and the new
// keys 50 us late (they hold NaN until then): a tile with a new key loaded early, or q read
// early, shows up as NaN or a wrong result. (With LOCUS_CUDA_PDL=0 every load is late anyway.)
TEST(GpuPagedAttention, NewKeysAndQueriesWrittenLate) {
  REQUIRE_GPU();
  Case decode{"late: decode d128 g8 splits",
              32,
              4,
              128,
              128,
              16,
              {{1100, 1}, {64, 1}, {65, 1}, {3, 1}, {1, 1}}};
  decode.seed = 61;
  decode.late_writes = true;
  check_case(decode);
  Case mixed{"late: mixed d128 g8 bs32",
             32,
             4,
             128,
             128,
             32,
             {{1000, 1}, {700, 300}, {5, 5}, {129, 1}, {333, 64}, {100, 4}}};
  mixed.seed = 62;
  mixed.late_writes = true;
  check_case(mixed);
  Case mla{"late: mla d80 v64 decode", 16, 1, 80, 64, 16, decode_batch(8, 1200, 63)};
  mla.v_in_k = true;
  mla.seed = 63;
  mla.late_writes = true;
  check_case(mla);
}

TEST(GpuPagedAttention, MlaAsMqaOverLatent) {
  REQUIRE_GPU();
  check_case({"mla d80 v64 decode", 16, 1, 80, 64, 16, decode_batch(8, 1200, 51), 0, true, 1, 51});
  check_case({"mla d80 v64 prefill+decode",
              16,
              1,
              80,
              64,
              16,
              {{200, 200}, {90, 1}, {300, 40}},
              0,
              true,
              1,
              52});
  check_case(
      {"mla d576 v512 decode", 16, 1, 576, 512, 16, decode_batch(4, 2000, 53), 0, true, 1, 53});
  check_case({"mla d576 v512 prefill+decode",
              16,
              1,
              576,
              512,
              16,
              {{300, 40}, {90, 90}, {500, 1}},
              0,
              true,
              2,
              54});
  check_case(
      {"mla d576 v512 unshared v", 16, 1, 576, 512, 32, {{70, 70}, {300, 1}}, 0, false, 1, 55});
}

TEST(GpuPagedAttention, RejectsUnsupportedShapes) {
  // Validation happens before any CUDA call, so this runs without a GPU too.
  cuda::PagedAttentionArgs a;
  a.q = a.k_cache = a.v_cache = a.out = reinterpret_cast<void*>(uintptr_t{256});
  a.query_start_loc = a.seq_lens = a.block_table = reinterpret_cast<const int32_t*>(uintptr_t{256});
  a.num_seqs = 1;
  a.num_tokens = 1;
  a.num_q_heads = 8;
  a.num_kv_heads = 2;
  a.head_dim = 128;
  a.v_head_dim = 128;
  a.q_head_stride = 128;
  a.q_token_stride = 1024;
  a.k_head_stride = a.v_head_stride = 128;
  a.k_token_stride = a.v_token_stride = 256;
  a.k_block_stride = a.v_block_stride = 4096;
  a.block_table_stride = 4;
  a.block_size = 16;
  a.max_query_len = 1;
  a.max_seq_len = 32768;  // long enough to need splits, hence a workspace
  ASSERT_GT(cuda::paged_attention_workspace_bytes(a), 0u);
  EXPECT_EQ(cuda::launch_paged_attention(a, nullptr), cudaErrorInvalidValue);  // no workspace
  cuda::PagedAttentionArgs b = a;
  b.head_dim = 12;
  EXPECT_EQ(cuda::launch_paged_attention(b, nullptr), cudaErrorInvalidValue);
  b = a;
  b.v_head_dim = 520;
  EXPECT_EQ(cuda::launch_paged_attention(b, nullptr), cudaErrorInvalidValue);
  b = a;
  b.head_dim = 584;
  EXPECT_EQ(cuda::launch_paged_attention(b, nullptr), cudaErrorInvalidValue);
  b = a;
  b.k_token_stride = 260;
  EXPECT_EQ(cuda::launch_paged_attention(b, nullptr), cudaErrorInvalidValue);
  b = a;
  b.num_q_heads = 7;
  EXPECT_EQ(cuda::launch_paged_attention(b, nullptr), cudaErrorInvalidValue);
}

#endif  // LOCUS_HAS_CUDA

}  // namespace
}  // namespace locus
