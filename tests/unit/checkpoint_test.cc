// Checkpoint folders: sharded index round trips, the ways an index and its shards can disagree,
// the single-file and bare-folder layouts, and a tiny MoE checkpoint read back tensor by tensor.
#include "io/checkpoint.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "io/safetensors_writer.h"

namespace locus {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    static std::atomic<int> counter{0};
    dir_ = fs::path(::testing::TempDir()) /
           ("locus_checkpoint_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Six 1 KiB tensors; with 2 KiB shards they make three shards of two.
  NamedTensors six_tensors() const {
    return {
        {"model.embed_tokens.weight", random_tensor({16, 32}, DType::kBF16, 1)},
        {"model.layers.0.mlp.experts.0.w1.weight", random_tensor({32, 32}, DType::kF8E4M3, 2)},
        {"model.layers.0.mlp.experts.0.w1.weight_scale_inv",
         random_tensor({16, 16}, DType::kF32, 3)},
        {"model.layers.0.mlp.experts.1.w1.weight", random_tensor({16, 128}, DType::kF4E2M1, 4)},
        {"model.layers.0.mlp.experts.1.w1.weight_scale", random_tensor({1024}, DType::kUE8M0, 5)},
        {"lm_head.weight", random_tensor({8, 64}, DType::kF16, 6)}};
  }

  static Tensor random_tensor(const Dims& shape, DType dtype, uint32_t seed) {
    auto t = Tensor::empty(shape, dtype);
    if (!t) std::abort();
    std::mt19937 rng(seed);
    auto* bytes = static_cast<uint8_t*>(t->raw_data());
    for (size_t i = 0; i < t->nbytes(); ++i) {
      bytes[i] = static_cast<uint8_t>(rng());
    }
    return *t;
  }

  nlohmann::json read_index() const {
    std::ifstream in(dir_ / kSafetensorsIndexFileName);
    return nlohmann::json::parse(in);
  }
  void write_text(const fs::path& path, const std::string& text) const {
    std::ofstream out(path, std::ios::binary);
    out << text;
  }
  void write_index(const nlohmann::json& index) const {
    write_text(dir_ / kSafetensorsIndexFileName, index.dump(2));
  }

  fs::path dir_;
};

std::vector<uint8_t> bytes_of(const Tensor& t) {
  const auto* p = static_cast<const uint8_t*>(t.raw_data());
  return {p, p + t.nbytes()};
}

void expect_same_tensors(const Checkpoint& checkpoint, const NamedTensors& expected) {
  ASSERT_EQ(checkpoint.num_tensors(), expected.size());
  for (const auto& [name, want] : expected) {
    auto got = checkpoint.tensor(name);
    ASSERT_TRUE(got.has_value()) << got.error().to_string();
    EXPECT_EQ(got->dtype(), want.dtype()) << name;
    EXPECT_EQ(got->shape(), want.shape()) << name;
    EXPECT_EQ(bytes_of(*got), bytes_of(want)) << name;
  }
}

TEST_F(CheckpointTest, ThreeShardRoundTrip) {
  auto tensors = six_tensors();
  ASSERT_TRUE(write_sharded_checkpoint(dir_, tensors, 2048, {{"format", "pt"}}).is_ok());
  for (int i = 1; i <= 3; ++i) {
    EXPECT_TRUE(fs::exists(dir_ / sharded_checkpoint_file_name(i, 3)));
  }
  EXPECT_EQ(sharded_checkpoint_file_name(3, 4), "model-00003-of-00004.safetensors");

  auto index = read_index();
  EXPECT_EQ(index["metadata"]["total_size"], 6 * 1024);
  EXPECT_EQ(index["weight_map"]["lm_head.weight"], "model-00003-of-00003.safetensors");
  EXPECT_EQ(index["weight_map"]["model.embed_tokens.weight"], "model-00001-of-00003.safetensors");

  auto checkpoint = Checkpoint::open(dir_);
  ASSERT_TRUE(checkpoint.has_value()) << checkpoint.error().to_string();
  EXPECT_EQ(checkpoint->layout(), CheckpointLayout::kIndexed);
  EXPECT_EQ(checkpoint->files().size(), 3u);
  EXPECT_EQ(checkpoint->index_total_size(), 6u * 1024);
  EXPECT_EQ(checkpoint->total_bytes(), 6u * 1024);
  EXPECT_TRUE(checkpoint->unindexed_tensors().empty());
  expect_same_tensors(*checkpoint, tensors);

  auto names = checkpoint->names();
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
  EXPECT_EQ(names.front(), "lm_head.weight");
  EXPECT_EQ(checkpoint->file_of("lm_head.weight")->filename(), "model-00003-of-00003.safetensors");
  EXPECT_EQ(checkpoint->info("model.layers.0.mlp.experts.1.w1.weight")->dtype, DType::kF4E2M1);
  EXPECT_EQ(checkpoint->files()[0].metadata().at("format"), "pt");

  auto missing = checkpoint->tensor("model.norm.weight");
  ASSERT_FALSE(missing.has_value());
  EXPECT_EQ(missing.error().code(), ErrorCode::kNotFound);
  EXPECT_THAT(missing.error().message(), HasSubstr("model.norm.weight"));
  EXPECT_FALSE(checkpoint->contains("model.norm.weight"));
  EXPECT_EQ(checkpoint->file_of("nope").error().code(), ErrorCode::kNotFound);
}

TEST_F(CheckpointTest, SmallCheckpointIsOneModelSafetensors) {
  auto tensors = six_tensors();
  ASSERT_TRUE(write_sharded_checkpoint(dir_, tensors, 1 << 20).is_ok());
  EXPECT_TRUE(fs::exists(dir_ / "model.safetensors"));
  EXPECT_FALSE(fs::exists(dir_ / kSafetensorsIndexFileName));
  auto checkpoint = Checkpoint::open(dir_);
  ASSERT_TRUE(checkpoint.has_value()) << checkpoint.error().to_string();
  EXPECT_EQ(checkpoint->layout(), CheckpointLayout::kSingleFile);
  expect_same_tensors(*checkpoint, tensors);

  // A path to the file itself opens it alone.
  auto file = Checkpoint::open(dir_ / "model.safetensors");
  ASSERT_TRUE(file.has_value()) << file.error().to_string();
  EXPECT_EQ(file->num_tensors(), tensors.size());
}

TEST_F(CheckpointTest, TensorLargerThanAShardGetsItsOwn) {
  NamedTensors tensors = {{"a", random_tensor({100}, DType::kU8, 1)},
                          {"big", random_tensor({1000}, DType::kU8, 2)},
                          {"b", random_tensor({100}, DType::kU8, 3)}};
  ASSERT_TRUE(write_sharded_checkpoint(dir_, tensors, 500).is_ok());
  auto index = read_index();
  EXPECT_EQ(index["weight_map"]["big"], "model-00002-of-00003.safetensors");
  auto checkpoint = Checkpoint::open(dir_);
  ASSERT_TRUE(checkpoint.has_value()) << checkpoint.error().to_string();
  expect_same_tensors(*checkpoint, tensors);
  EXPECT_EQ(write_sharded_checkpoint(dir_, tensors, 0).code(), ErrorCode::kInvalidArgument);
}

TEST_F(CheckpointTest, IndexNamingAMissingShard) {
  ASSERT_TRUE(write_sharded_checkpoint(dir_, six_tensors(), 2048).is_ok());
  fs::remove(dir_ / "model-00002-of-00003.safetensors");
  auto checkpoint = Checkpoint::open(dir_);
  ASSERT_FALSE(checkpoint.has_value());
  EXPECT_EQ(checkpoint.error().code(), ErrorCode::kNotFound);
  const auto& m = checkpoint.error().message();
  EXPECT_THAT(m, HasSubstr(std::string(kSafetensorsIndexFileName)));
  EXPECT_THAT(m, HasSubstr("model-00002-of-00003.safetensors"));
  EXPECT_THAT(m, HasSubstr("model.layers.0.mlp.experts.0.w1.weight_scale_inv"));
}

TEST_F(CheckpointTest, WeightMapNamingATensorNotInItsShard) {
  ASSERT_TRUE(write_sharded_checkpoint(dir_, six_tensors(), 2048).is_ok());
  auto index = read_index();
  index["weight_map"]["model.layers.9.ghost"] = "model-00002-of-00003.safetensors";
  write_index(index);
  auto checkpoint = Checkpoint::open(dir_);
  ASSERT_FALSE(checkpoint.has_value());
  EXPECT_EQ(checkpoint.error().code(), ErrorCode::kNotFound);
  EXPECT_THAT(checkpoint.error().message(), HasSubstr("'model.layers.9.ghost'"));
  EXPECT_THAT(checkpoint.error().message(), HasSubstr("model-00002-of-00003.safetensors"));

  // Pointing a real tensor at the wrong shard is the same error.
  index = read_index();
  index["weight_map"]["lm_head.weight"] = "model-00001-of-00003.safetensors";
  write_index(index);
  checkpoint = Checkpoint::open(dir_);
  ASSERT_FALSE(checkpoint.has_value());
  EXPECT_EQ(checkpoint.error().code(), ErrorCode::kNotFound);
  EXPECT_THAT(checkpoint.error().message(), HasSubstr("'lm_head.weight'"));
}

TEST_F(CheckpointTest, ShardTensorsMissingFromTheMapAreServedAndListed) {
  auto tensors = six_tensors();
  ASSERT_TRUE(write_sharded_checkpoint(dir_, tensors, 2048).is_ok());
  auto index = read_index();
  index["weight_map"].erase("lm_head.weight");
  write_index(index);
  auto checkpoint = Checkpoint::open(dir_);
  ASSERT_TRUE(checkpoint.has_value()) << checkpoint.error().to_string();
  EXPECT_EQ(checkpoint->unindexed_tensors(), std::vector<std::string>{"lm_head.weight"});
  expect_same_tensors(*checkpoint, tensors);
}

TEST_F(CheckpointTest, TensorInTwoShardsIsAnError) {
  auto a = random_tensor({4}, DType::kF32, 1);
  ASSERT_TRUE(write_safetensors(dir_ / "one.safetensors", {{"a", a}, {"b", a}}).is_ok());
  ASSERT_TRUE(write_safetensors(dir_ / "two.safetensors", {{"a", a}, {"c", a}}).is_ok());
  write_index({{"weight_map",
                {{"a", "one.safetensors"}, {"b", "one.safetensors"}, {"c", "two.safetensors"}}}});
  auto checkpoint = Checkpoint::open(dir_);
  ASSERT_FALSE(checkpoint.has_value());
  EXPECT_EQ(checkpoint.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(checkpoint.error().message(), HasSubstr("'a'"));
  EXPECT_THAT(checkpoint.error().message(), HasSubstr("one.safetensors"));
  EXPECT_THAT(checkpoint.error().message(), HasSubstr("two.safetensors"));
}

TEST_F(CheckpointTest, MalformedIndex) {
  auto a = random_tensor({4}, DType::kF32, 1);
  ASSERT_TRUE(write_safetensors(dir_ / "one.safetensors", {{"a", a}}).is_ok());
  struct Case {
    std::string text;
    ErrorCode code;
    std::string_view expected;
  };
  std::vector<Case> cases = {
      {"{\"weight_map\": {\"a\": ", ErrorCode::kParseError, "not valid JSON"},
      {"[]", ErrorCode::kInvalidArgument, "JSON object"},
      {R"({"metadata": {}})", ErrorCode::kInvalidArgument, "weight_map"},
      {R"({"weight_map": []})", ErrorCode::kInvalidArgument, "weight_map"},
      {R"({"weight_map": {}})", ErrorCode::kInvalidArgument, "empty"},
      {R"({"weight_map": {"a": 1}})", ErrorCode::kInvalidArgument, "'a'"},
      {R"({"weight_map": {"a": "../one.safetensors"}})", ErrorCode::kInvalidArgument, "'a'"},
      {R"({"weight_map": {"a": "/etc/passwd"}})", ErrorCode::kInvalidArgument, "'a'"},
      {R"({"weight_map": {"a": ".."}})", ErrorCode::kInvalidArgument, "'a'"},
  };
  for (const auto& c : cases) {
    write_text(dir_ / kSafetensorsIndexFileName, c.text);
    auto checkpoint = Checkpoint::open(dir_);
    ASSERT_FALSE(checkpoint.has_value()) << c.text;
    EXPECT_EQ(checkpoint.error().code(), c.code)
        << c.text << " -> " << checkpoint.error().to_string();
    EXPECT_THAT(checkpoint.error().message(), HasSubstr(std::string(kSafetensorsIndexFileName)));
    EXPECT_THAT(checkpoint.error().message(), HasSubstr(std::string(c.expected))) << c.text;
  }
  write_text(dir_ / kSafetensorsIndexFileName, R"({"weight_map": {"a": "one.safetensors"}})");
  EXPECT_TRUE(Checkpoint::open(dir_).has_value());
}

TEST_F(CheckpointTest, CorruptShardIsReportedWithItsPath) {
  ASSERT_TRUE(write_sharded_checkpoint(dir_, six_tensors(), 2048).is_ok());
  auto shard = dir_ / "model-00003-of-00003.safetensors";
  fs::resize_file(shard, fs::file_size(shard) - 1);
  auto checkpoint = Checkpoint::open(dir_);
  ASSERT_FALSE(checkpoint.has_value());
  EXPECT_EQ(checkpoint.error().code(), ErrorCode::kOutOfRange);
  EXPECT_THAT(checkpoint.error().message(), HasSubstr(shard.string() + ": tensor '"));
  EXPECT_THAT(checkpoint.error().message(), HasSubstr("end past data size"));
}

TEST_F(CheckpointTest, MissingOrEmptyFolder) {
  auto missing = Checkpoint::open(dir_ / "no-such-model");
  ASSERT_FALSE(missing.has_value());
  EXPECT_EQ(missing.error().code(), ErrorCode::kNotFound);
  EXPECT_THAT(missing.error().message(), HasSubstr("no-such-model"));
  write_text(dir_ / "config.json", "{}");
  auto empty = Checkpoint::open(dir_);
  ASSERT_FALSE(empty.has_value());
  EXPECT_EQ(empty.error().code(), ErrorCode::kNotFound);
  EXPECT_THAT(empty.error().message(), HasSubstr("*.safetensors"));
}

TEST_F(CheckpointTest, FolderWithoutIndexUsesEveryFile) {
  auto a = random_tensor({4}, DType::kF32, 1);
  auto b = random_tensor({2, 2}, DType::kBF16, 2);
  ASSERT_TRUE(write_safetensors(dir_ / "part-b.safetensors", {{"b", b}}).is_ok());
  ASSERT_TRUE(write_safetensors(dir_ / "part-a.safetensors", {{"a", a}}).is_ok());
  auto checkpoint = Checkpoint::open(dir_);
  ASSERT_TRUE(checkpoint.has_value()) << checkpoint.error().to_string();
  EXPECT_EQ(checkpoint->layout(), CheckpointLayout::kDirectory);
  expect_same_tensors(*checkpoint, {{"a", a}, {"b", b}});
  EXPECT_EQ(checkpoint->file_of("b")->filename(), "part-b.safetensors");

  ASSERT_TRUE(write_safetensors(dir_ / "part-c.safetensors", {{"a", a}}).is_ok());
  auto duplicate = Checkpoint::open(dir_);
  ASSERT_FALSE(duplicate.has_value());
  EXPECT_EQ(duplicate.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(duplicate.error().message(), HasSubstr("part-a.safetensors"));
  EXPECT_THAT(duplicate.error().message(), HasSubstr("part-c.safetensors"));
}

TEST_F(CheckpointTest, FolderWithoutIndexNeedsEveryNumberedShard) {
  ASSERT_TRUE(write_sharded_checkpoint(dir_, six_tensors(), 2048).is_ok());
  fs::remove(dir_ / kSafetensorsIndexFileName);
  auto complete = Checkpoint::open(dir_);
  ASSERT_TRUE(complete.has_value()) << complete.error().to_string();
  EXPECT_EQ(complete->layout(), CheckpointLayout::kDirectory);
  EXPECT_EQ(complete->num_tensors(), 6u);

  fs::remove(dir_ / "model-00003-of-00003.safetensors");
  auto partial = Checkpoint::open(dir_);
  ASSERT_FALSE(partial.has_value());
  EXPECT_EQ(partial.error().code(), ErrorCode::kNotFound);
  EXPECT_THAT(partial.error().message(), HasSubstr("model-00003-of-00003.safetensors is missing"));
}

// A Qwen3-MoE / DeepSeek-shaped toy: bf16 attention, fp8 block-scaled experts, MXFP4 experts with
// e8m0 scales, written by write_sharded_checkpoint and read back tensor by tensor.
TEST_F(CheckpointTest, RealisticMoeCheckpoint) {
  NamedTensors tensors;
  uint32_t seed = 100;
  auto add = [&](const std::string& name, const Dims& shape, DType dtype) {
    tensors.emplace_back(name, random_tensor(shape, dtype, seed++));
  };
  const int hidden = 64;
  add("model.embed_tokens.weight", {128, hidden}, DType::kBF16);
  for (int layer = 0; layer < 3; ++layer) {
    std::string p = "model.layers." + std::to_string(layer) + ".";
    add(p + "input_layernorm.weight", {hidden}, DType::kBF16);
    for (const char* proj : {"q_proj", "k_proj", "v_proj", "o_proj"}) {
      add(p + "self_attn." + proj + ".weight", {hidden, hidden}, DType::kBF16);
    }
    add(p + "post_attention_layernorm.weight", {hidden}, DType::kBF16);
    add(p + "mlp.gate.weight", {8, hidden}, DType::kF32);
    for (int e = 0; e < 8; ++e) {
      std::string x = p + "mlp.experts." + std::to_string(e) + ".";
      for (const char* proj : {"gate_proj", "up_proj", "down_proj"}) {
        if (layer % 2 == 0) {
          add(x + proj + ".weight", {hidden, hidden}, DType::kF8E4M3);
          add(x + proj + ".weight_scale_inv", {1, 1}, DType::kF32);
        } else {
          add(x + proj + ".weight", {hidden, hidden}, DType::kF4E2M1);
          add(x + proj + ".weight_scale", {hidden, hidden / 32}, DType::kUE8M0);
        }
      }
    }
  }
  add("model.norm.weight", {hidden}, DType::kBF16);
  add("lm_head.weight", {128, hidden}, DType::kBF16);

  ASSERT_TRUE(write_sharded_checkpoint(dir_, tensors, 32 << 10, {{"format", "pt"}}).is_ok());
  auto checkpoint = Checkpoint::open(dir_);
  ASSERT_TRUE(checkpoint.has_value()) << checkpoint.error().to_string();
  EXPECT_EQ(checkpoint->layout(), CheckpointLayout::kIndexed);
  EXPECT_GT(checkpoint->files().size(), 3u);
  EXPECT_EQ(checkpoint->index_total_size(), checkpoint->total_bytes());
  expect_same_tensors(*checkpoint, tensors);
  for (const auto& name : checkpoint->names()) {
    auto path = checkpoint->file_of(name);
    ASSERT_TRUE(path.has_value());
    EXPECT_TRUE(path->filename().string().rfind("model-", 0) == 0) << *path;
  }
}

}  // namespace
}  // namespace locus
