#include "core/tensor.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>
#include <vector>

namespace locus {
namespace {

TEST(Dims, BasicsAndNumel) {
  Dims d{2, 3, 4};
  EXPECT_EQ(d.size(), 3);
  EXPECT_EQ(d.to_string(), "[2, 3, 4]");
  EXPECT_EQ(shape_numel(d), 24);
  EXPECT_EQ(shape_numel(Dims{}), 1);
  EXPECT_EQ(shape_numel(Dims{0, 5}), 0);
  EXPECT_EQ(shape_numel(Dims{-1, 5}), -1);
  EXPECT_EQ(shape_numel(Dims{INT64_MAX / 2, 3}), -1);  // overflow is reported, not wrapped
  EXPECT_EQ(contiguous_strides(d), (Dims{12, 4, 1}));
}

TEST(Tensor, EmptyAllocatesAlignedContiguousHostMemory) {
  auto t = Tensor::empty({4, 8}, DType::kBF16);
  ASSERT_TRUE(t) << t.status().to_string();
  EXPECT_EQ(t->numel(), 32);
  EXPECT_EQ(t->nbytes(), 64u);
  EXPECT_TRUE(t->is_contiguous());
  EXPECT_TRUE(t->device().is_cpu());
  EXPECT_TRUE(t->storage()->is_owning());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t->raw_data()) % 64, 0u);
  EXPECT_EQ(t->to_string(), "bf16[4, 8] cpu");
}

TEST(Tensor, ZerosAreZero) {
  auto t = Tensor::zeros({3, 5}, DType::kF32);
  ASSERT_TRUE(t);
  for (int i = 0; i < 15; ++i)
    EXPECT_EQ(t->data<float>()[i], 0.0f);
}

TEST(Tensor, PackedFp4CountsHalfBytesAndNeedsEvenRows) {
  auto t = Tensor::empty({3, 16}, DType::kF4E2M1);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->nbytes(), 24u);
  EXPECT_FALSE(Tensor::empty({3, 15}, DType::kF4E2M1));
  auto s = t->slice(1, 4, 12);
  ASSERT_TRUE(s);
  EXPECT_EQ(static_cast<char*>(s->raw_data()) - static_cast<char*>(t->raw_data()), 2);
  EXPECT_FALSE(t->slice(1, 3, 8));  // would split a byte
  EXPECT_FALSE(t->transpose(0, 1));
}

TEST(Tensor, ViewsShareStorageAndIndexCorrectly) {
  auto t = Tensor::empty({2, 3, 4}, DType::kF32);
  ASSERT_TRUE(t);
  std::iota(t->data<float>(), t->data<float>() + 24, 0.0f);

  auto row = t->select(0, 1);
  ASSERT_TRUE(row);
  EXPECT_EQ(row->shape(), (Dims{3, 4}));
  EXPECT_EQ(row->data<float>()[0], 12.0f);
  EXPECT_EQ(row->storage(), t->storage());

  auto cols = t->slice(2, 1, 3);
  ASSERT_TRUE(cols);
  EXPECT_FALSE(cols->is_contiguous());
  EXPECT_EQ(cols->data<float>()[0], 1.0f);
  EXPECT_EQ(cols->stride(1), 4);

  auto tr = t->transpose(1, 2);
  ASSERT_TRUE(tr);
  EXPECT_EQ(tr->shape(), (Dims{2, 4, 3}));
  EXPECT_EQ(tr->stride(-1), 4);
  EXPECT_FALSE(tr->is_contiguous());
  EXPECT_FALSE(tr->reshape({24}));

  auto flat = t->reshape({-1});
  ASSERT_TRUE(flat);
  EXPECT_EQ(flat->shape(), (Dims{24}));
  auto two = t->reshape({4, -1});
  ASSERT_TRUE(two);
  EXPECT_EQ(two->shape(), (Dims{4, 6}));
}

TEST(Tensor, BadViewArgumentsAreErrorsNamingThem) {
  auto t = Tensor::empty({2, 3}, DType::kF16);
  ASSERT_TRUE(t);
  auto bad_dim = t->slice(2, 0, 1);
  ASSERT_FALSE(bad_dim);
  EXPECT_EQ(bad_dim.error().code(), ErrorCode::kOutOfRange);
  EXPECT_NE(bad_dim.error().message().find("f16[2, 3]"), std::string::npos);
  EXPECT_FALSE(t->slice(1, 2, 4));
  EXPECT_FALSE(t->slice(1, 2, 1));
  EXPECT_FALSE(t->select(0, 2));
  EXPECT_FALSE(t->reshape({5}));
  EXPECT_FALSE(t->reshape({-1, -1}));
  EXPECT_FALSE(t->view_as(DType::kF32));
  EXPECT_TRUE(t->view_as(DType::kBF16));
}

TEST(Tensor, FromStorageChecksBoundsAndAlignment) {
  std::vector<uint8_t> buffer(100);
  auto storage = Storage::borrow(buffer.data(), buffer.size(), Device::cpu());
  EXPECT_FALSE(storage->is_owning());
  auto ok = Tensor::from_storage(storage, {10, 4}, DType::kF16, 20);
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->raw_data(), buffer.data() + 20);
  EXPECT_EQ(ok->byte_offset(), 20u);
  auto past_end = Tensor::from_storage(storage, {10, 4}, DType::kF16, 21);
  ASSERT_FALSE(past_end);
  EXPECT_EQ(past_end.error().code(), ErrorCode::kOutOfRange);
  EXPECT_FALSE(Tensor::from_storage(storage, {2}, DType::kF32, 2));  // misaligned element
  EXPECT_FALSE(Tensor::from_storage(nullptr, {2}, DType::kF32, 0));
}

TEST(Storage, KeepAliveLivesAsLongAsTheViews) {
  auto flag = std::make_shared<int>(1);
  std::weak_ptr<int> watch = flag;
  std::vector<uint8_t> buffer(16);
  Tensor view;
  {
    auto storage = Storage::borrow(buffer.data(), buffer.size(), Device::cpu(), flag);
    flag.reset();
    view = *Tensor::from_storage(storage, {4}, DType::kF32, 0);
  }
  EXPECT_FALSE(watch.expired());
  view = Tensor();
  EXPECT_TRUE(watch.expired());
}

TEST(Storage, AdoptRunsTheDeleterOnce) {
  int calls = 0;
  {
    auto s = Storage::adopt(new char[8], 8, Device::cuda(0), [&calls](void* p) {
      ++calls;
      delete[] static_cast<char*>(p);
    });
    EXPECT_EQ(s->device().to_string(), "cuda:0");
  }
  EXPECT_EQ(calls, 1);
}

}  // namespace
}  // namespace locus
