// The fused q/k-norm + rope + KV-write step on the GPU: against the CPU's composed form, and
// its two kernel paths (constants loaded before or after the PDL wait) bit for bit.
// SKIPPED where no GPU is present.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "backend/ops_rope.h"
#include "unit/ops_test_util.h"

#ifdef LOCUS_HAS_CUDA
#include "backend/cuda/kernels/elementwise/elementwise_launch.h"
#include "gpu/cuda_ops_fixture.h"
#include "gpu/late_writer.h"
#endif

namespace locus {
namespace {

#ifndef LOCUS_HAS_CUDA
TEST(CudaQkvRope, NeedsCuda) {
  GTEST_SKIP() << "built without CUDA";
}
#else

using CudaQkvRope = gpu_test::CudaOpsTest;
using testing::random_f32;
using testing::to_floats;

// The fused q/k-norm + rope + KV-write kernel reads its constants (norm weights, positions,
// slots, frequencies) before its PDL wait: the same bits as reading them after it, and the QKV
// rows still only after it. Here the rows arrive 50 us late, from a kernel that lets the rope
// kernel start at once; the buffer holds NaN until then.
TEST_F(CudaQkvRope, ConstantsBeforeTheWaitSameBits) {
  const int64_t t = 3, hq = 8, hk = 2, blocks = 2, bs = 4;
  for (int64_t d : {64, 128}) {
    for (QkNorm norm : {QkNorm::kPerHead, QkNorm::kNone}) {
      SCOPED_TRACE("d " + std::to_string(d) + (norm == QkNorm::kNone ? " no norm" : " per head"));
      QkvSpec s = testing::make_qkv_spec(hq, hk, d, norm);
      if (norm != QkNorm::kNone) {
        s.q_norm = gpu_->prepare_weight(random_f32({d}, 8400, 0.5f, 1.5f)).value();
        s.k_norm = gpu_->prepare_weight(random_f32({d}, 8401, 0.5f, 1.5f)).value();
      }
      RopeConfig rc;
      rc.theta = 1e6;
      rc.rotary_dim = d / 2;  // partial rotary: the tail is copied
      const RopeParams p = testing::rope_params_for(rc, 40960, 1.0f);
      const Tensor qkv = up(random_f32({t, s.width()}, 8402 + static_cast<uint64_t>(d)));
      const Tensor pos = up_raw(testing::from_i32({7, 900, 30000}, {t}));
      const Tensor slots = up_raw(testing::from_i64({5, 0, 3}, {t}));
      std::vector<std::vector<float>> want;
      for (const bool preload : {false, true}) {
        cuda::set_rope_preload(preload);
        Tensor kc = out_bf16({blocks, bs, hk, d});
        Tensor vc = out_bf16({blocks, bs, hk, d});
        Tensor q = out_bf16({t, hq, d});
        Tensor in = qkv;
        if (preload) {
          in = out_bf16({t, s.width()});  // NaN until the late writer copies the rows
          const Tensor rows = up_raw(testing::from_i64({0, 1, 2}, {t}));
          gpu_test::RowCopy copy{qkv.raw_data(), in.raw_data(), rows.data<int64_t>(),
                                 static_cast<int>(t), static_cast<size_t>(s.width()) * 2};
          ASSERT_EQ(gpu_test::launch_late_writer(&copy, 1, 50000, gpu_->stream()), cudaSuccess);
        }
        ASSERT_TRUE(gpu_->qkv_norm_rope_write_kv(in, s, pos, p, slots, kc, vc, q).is_ok());
        const std::vector<std::vector<float>> got = {down(q), down(kc), down(vc)};
        if (!preload) {
          want = got;
          continue;
        }
        for (size_t i = 0; i < got.size(); ++i) {
          // Bit-equal, NaN included: the unwritten cache rows stay poisoned in both runs.
          ASSERT_EQ(got[i].size(), want[i].size());
          EXPECT_EQ(std::memcmp(got[i].data(), want[i].data(), got[i].size() * sizeof(float)), 0)
              << (i == 0   ? "q"
                  : i == 1 ? "k cache"
                           : "v cache");
        }
        for (float v : got[0])
          ASSERT_FALSE(std::isnan(v)) << "q read before the late writer's rows";
      }
    }
  }
  cuda::set_rope_preload(true);
}

// The fused q/k-norm + rope + KV write against the CPU's composed form: per-head norm, no norm
// and the per-layer norm (which the GPU runs composed), neox and interleaved partial rope.
TEST_F(CudaQkvRope, QkvNormRopeWriteKv) {
  const int64_t t = 6, hq = 8, hk = 2, blocks = 4, bs = 4;
  for (int64_t d : {64, 128}) {
    for (QkNorm norm : {QkNorm::kPerHead, QkNorm::kNone, QkNorm::kPerLayer}) {
      for (bool neox : {true, false}) {
        QkvSpec s = testing::make_qkv_spec(hq, hk, d, norm);
        const bool per_head = norm == QkNorm::kPerHead;
        Tensor qn, kn;
        if (norm != QkNorm::kNone) {
          qn = random_f32({per_head ? d : hq * d}, 8000, 0.5f, 1.5f);
          kn = random_f32({per_head ? d : hk * d}, 8001, 0.5f, 1.5f);
        }
        RopeConfig rc;
        rc.theta = 1e6;
        rc.layout = neox ? RopeLayout::kNeox : RopeLayout::kInterleaved;
        rc.rotary_dim = neox ? d : d / 2;
        const RopeParams p = testing::rope_params_for(rc, 40960, neox ? 1.0f : 1.1f);
        Tensor qkv = bf16_exact(random_f32({t, s.width()}, 8002 + static_cast<uint64_t>(d)));
        Tensor pos = testing::from_i32({0, 1, 77, 900, 30000, 5}, {t});
        Tensor slots = testing::from_i64({3, 0, 12, 15, 8, 9}, {t});

        QkvSpec cs = s;
        cs.q_norm = qn;
        cs.k_norm = kn;
        Tensor kc = cpu_.zeros({blocks, bs, hk, d}, DType::kF32).value();
        Tensor vc = cpu_.zeros({blocks, bs, hk, d}, DType::kF32).value();
        Tensor want_q = Tensor::empty({t, hq, d}, DType::kF32).value();
        ASSERT_TRUE(cpu_.qkv_norm_rope_write_kv(qkv, cs, pos, p, slots, kc, vc, want_q).is_ok());

        QkvSpec gs = s;
        if (norm != QkNorm::kNone) {
          gs.q_norm = gpu_->prepare_weight(qn).value();
          gs.k_norm = gpu_->prepare_weight(kn).value();
        }
        Tensor gkc = gpu_->zeros({blocks, bs, hk, d}, DType::kBF16).value();
        Tensor gvc = gpu_->zeros({blocks, bs, hk, d}, DType::kBF16).value();
        Tensor got_q = out_bf16({t, hq, d});
        ASSERT_TRUE(gpu_->qkv_norm_rope_write_kv(up(qkv), gs, up_raw(pos), p, up_raw(slots), gkc,
                                                 gvc, got_q)
                        .is_ok());
        const std::string what = std::string("qkv_norm_rope_write_kv d") + std::to_string(d) +
                                 (norm == QkNorm::kPerHead ? " per-head"
                                  : norm == QkNorm::kNone  ? " no-norm"
                                                           : " per-layer") +
                                 (neox ? " neox" : " interleaved");
        expect_close(down(got_q), to_floats(want_q), (what + " q").c_str());
        expect_close(down(gkc), to_floats(kc), (what + " k cache").c_str());
        expect_close(down(gvc), to_floats(vc), (what + " v cache").c_str());
      }
    }
  }
}

#endif

}  // namespace
}  // namespace locus
