// The expert-exchange ops on the CPU against a hand-worked plan: moe_dispatch_plan (the
// low_latency all-to-all's blocks) and gather_sum_rows (its combine), and their checks.
#include <gtest/gtest.h>

#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "unit/ops_test_util.h"

namespace locus {
namespace {

using testing::from_floats;
using testing::from_i32;
using testing::to_floats;

std::vector<int32_t> ints(const Tensor& t) {
  return {t.data<int32_t>(), t.data<int32_t>() + t.numel()};
}

TEST(OpsExchange, DispatchPlanFillsEachRanksBlockInTokenOrder) {
  CpuBackend ops;
  // 4 experts on 2 ranks (0, 1 on rank 0; 2, 3 on rank 1), 3 tokens, top-2, blocks of 4.
  Tensor owner = from_i32({0, 0, 1, 1}, {4});
  Tensor ids = from_i32({0, 1, /**/ 2, 0, /**/ 3, 2}, {3, 2});
  Tensor w = from_floats({0.5f, 0.5f, 0.7f, 0.3f, 0.6f, 0.4f}, {3, 2});
  const int64_t ranks = 2, cap = 4, k = 2;
  Tensor send_index = Tensor::empty({ranks * cap}, DType::kI32).value();
  Tensor send_ids = Tensor::empty({ranks * cap, k}, DType::kI32).value();
  Tensor send_w = Tensor::empty({ranks * cap, k}, DType::kF32).value();
  Tensor combine = Tensor::empty({ranks, 3}, DType::kI32).value();
  ASSERT_TRUE(
      ops.moe_dispatch_plan(ids, w, owner, ranks, cap, send_index, send_ids, send_w, combine)
          .is_ok());
  // Rank 0's block: tokens 0 and 1; rank 1's: tokens 1 and 2.
  EXPECT_EQ(ints(send_index), (std::vector<int32_t>{0, 1, -1, -1, 1, 2, -1, -1}));
  EXPECT_EQ(ints(send_ids),
            (std::vector<int32_t>{0, 1, 2, 0, -1, -1, -1, -1, 2, 0, 3, 2, -1, -1, -1, -1}));
  EXPECT_EQ(to_floats(send_w), (std::vector<float>{0.5f, 0.5f, 0.7f, 0.3f, 0, 0, 0, 0, 0.7f, 0.3f,
                                                   0.6f, 0.4f, 0, 0, 0, 0}));
  EXPECT_EQ(ints(combine), (std::vector<int32_t>{0, 1, -1, /**/ -1, 4, 5}));

  // Blocks too small for the tokens, an expert id the layer lacks, an owner outside the group.
  Status s = ops.moe_dispatch_plan(ids, w, owner, ranks, 2, send_index, send_ids, send_w, combine);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("blocks of 2 rows cannot take 3 tokens"), std::string::npos)
      << s.message();
  Tensor bad_ids = from_i32({0, 1, 2, 9, 3, 2}, {3, 2});
  s = ops.moe_dispatch_plan(bad_ids, w, owner, ranks, cap, send_index, send_ids, send_w, combine);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("token 1 is routed to expert 9"), std::string::npos) << s.message();
  s = ops.moe_dispatch_plan(ids, w, from_i32({0, 0, 1, 2}, {4}), ranks, cap, send_index, send_ids,
                            send_w, combine);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("expert 3 is owned by rank 2 of 2"), std::string::npos) << s.message();
}

TEST(OpsExchange, GatherSumRowsAddsTheIndexedRowsAndSkipsMinusOne) {
  CpuBackend ops;
  Tensor x = from_floats({1, 2, 10, 20, 100, 200}, {3, 2});
  Tensor index = from_i32({0, -1, 2, /**/ 1, -1, 1}, {2, 3});
  Tensor out = Tensor::empty({3, 2}, DType::kF32).value();
  ASSERT_TRUE(ops.gather_sum_rows(x, index, out).is_ok());
  EXPECT_EQ(to_floats(out), (std::vector<float>{11, 22, 0, 0, 110, 220}));
  Status s = ops.gather_sum_rows(x, from_i32({3}, {1, 1}), out);
  ASSERT_FALSE(s.is_ok());
  Tensor out1 = Tensor::empty({1, 2}, DType::kF32).value();
  s = ops.gather_sum_rows(x, from_i32({3}, {1, 1}), out1);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("index 3 at (0, 0) is outside [-1, 3)"), std::string::npos)
      << s.message();
  // gather_rows: -1 gives a zero row.
  Tensor rows = Tensor::empty({2, 2}, DType::kF32).value();
  ASSERT_TRUE(ops.gather_rows(x, from_i32({-1, 1}, {2}), rows).is_ok());
  EXPECT_EQ(to_floats(rows), (std::vector<float>{0, 0, 10, 20}));
}

}  // namespace
}  // namespace locus
