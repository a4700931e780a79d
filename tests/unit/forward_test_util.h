// Drives a Model like an engine would, for the forward tests: several prompts, each with its own
// (deliberately scattered) blocks of one paged cache, prefilled whole or in chunks, alone or
// batched together, then decoded greedily. Header-only.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "model/forward_batch.h"
#include "model/model.h"
#include "model/weight_source.h"

namespace locus::testing {

using Prompts = std::vector<std::vector<int32_t>>;

// Sequence i owns blocks [i * per_seq, (i + 1) * per_seq) in reverse order, so every read goes
// through the block table and sequences interleave in memory.
inline std::vector<int32_t> blocks_of(int64_t seq, int64_t per_seq) {
  std::vector<int32_t> blocks;
  for (int64_t b = per_seq - 1; b >= 0; --b)
    blocks.push_back(static_cast<int32_t>(seq * per_seq + b));
  return blocks;
}

// A fixture's transformers goldens (tests/fixtures/models/<name>/golden.safetensors): the
// prompts, f32 logits at every prompt position ([L_i * vocab]) and greedy continuations.
struct Goldens {
  Prompts prompts;
  std::vector<std::vector<float>> logits;
  Prompts greedy;
};

inline Goldens load_goldens(const std::filesystem::path& model_dir) {
  Goldens g;
  auto file = SafetensorsFile::open(model_dir / "golden.safetensors");
  EXPECT_TRUE(file.has_value()) << file.status().to_string();
  if (!file) return g;
  auto ints = [&](const std::string& name) {
    auto t = file->tensor(name);
    EXPECT_TRUE(t.has_value()) << name;
    if (!t) return std::vector<int32_t>();
    const auto* p = static_cast<const int32_t*>(t->raw_data());
    return std::vector<int32_t>(p, p + t->numel());
  };
  const int n = std::stoi(file->metadata().at("num_prompts"));
  for (int i = 0; i < n; ++i) {
    const std::string k = std::to_string(i);
    g.prompts.push_back(ints("prompt." + k));
    g.greedy.push_back(ints("greedy." + k));
    auto l = file->tensor("logits." + k);
    EXPECT_TRUE(l.has_value()) << "logits." << k;
    const auto* f = l ? static_cast<const float*>(l->raw_data()) : nullptr;
    g.logits.emplace_back(f, f + (l ? l->numel() : 0));
  }
  return g;
}

// A fixture model (tests/fixtures/models/<name>) opened for a test: its config, checkpoint and
// goldens.
struct Fixture {
  ModelConfig config;
  std::unique_ptr<CheckpointWeights> weights;
  Goldens goldens;
};

// nullopt after reporting a test failure when any part does not open or there are no prompts.
inline std::optional<Fixture> open_fixture(const std::string& name) {
  const auto dir = std::filesystem::path(LOCUS_TEST_DATA_DIR) / "models" / name;
  auto config = load_model_config(dir);
  EXPECT_TRUE(config.has_value()) << config.status().to_string();
  auto weights = CheckpointWeights::open(dir);
  EXPECT_TRUE(weights.has_value()) << weights.status().to_string();
  if (!config || !weights) return std::nullopt;
  Fixture f{std::move(*config), std::move(*weights), load_goldens(dir)};
  EXPECT_FALSE(f.goldens.prompts.empty()) << name << " has no golden prompts";
  if (f.goldens.prompts.empty()) return std::nullopt;
  return f;
}

inline int32_t argmax(std::span<const float> row) {
  return static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin());
}

// Whether `token` is among the `n` largest entries of `row` (ties counted generously).
inline bool in_top(std::span<const float> row, int32_t token, int n) {
  const float v = row[static_cast<size_t>(token)];
  int above = 0;
  for (float x : row)
    above += x > v ? 1 : 0;
  return above < n;
}

// vLLM's check_logprobs_close criterion for one position: each side's top-1 in the other's top 5.
inline bool top1_in_each_others_top5(std::span<const float> a, std::span<const float> b) {
  return in_top(b, argmax(a), 5) && in_top(a, argmax(b), 5);
}

struct Driver {
  Model& model;
  int64_t block_size = 4;
  int64_t max_tokens_per_seq = 64;

  int64_t blocks_per_seq() const { return (max_tokens_per_seq + block_size - 1) / block_size; }

  KvCache fresh_cache(int64_t num_seqs) const {
    return model.allocate_kv_cache(num_seqs * blocks_per_seq(), block_size).value();
  }

  // Logits at every prompt position, per prompt ([L_i * vocab]), with the prompts prefilled
  // together, `chunk` new tokens per sequence per step (0 = the whole prompt at once).
  std::vector<std::vector<float>> prefill_logits(const Prompts& prompts, int64_t chunk) const {
    const int64_t vocab = model.vocab_size();
    KvCache cache = fresh_cache(static_cast<int64_t>(prompts.size()));
    std::vector<int64_t> computed(prompts.size(), 0);
    std::vector<std::vector<float>> logits(prompts.size());
    while (true) {
      ForwardBatchBuilder builder(static_cast<int>(block_size));
      std::vector<std::pair<size_t, int64_t>> rows;  // (prompt, tokens added this step)
      for (size_t i = 0; i < prompts.size(); ++i) {
        const int64_t left = static_cast<int64_t>(prompts[i].size()) - computed[i];
        if (left == 0) continue;
        const int64_t n = chunk > 0 ? std::min(chunk, left) : left;
        const auto blocks = blocks_of(static_cast<int64_t>(i), blocks_per_seq());
        EXPECT_TRUE(builder
                        .add_sequence(std::span(prompts[i]).subspan(computed[i], n), computed[i],
                                      blocks, LogitsFor::kAllTokens)
                        .is_ok());
        rows.emplace_back(i, n);
      }
      if (rows.empty()) break;
      ForwardBatch batch = std::move(builder).build();
      auto out = model.forward(batch, cache);
      EXPECT_TRUE(out.has_value()) << out.status().to_string();
      if (!out) return {};
      const float* p = out->data<float>();
      for (auto [i, n] : rows) {
        logits[i].insert(logits[i].end(), p, p + n * vocab);
        p += n * vocab;
        computed[i] += n;
      }
    }
    return logits;
  }

  // Each prompt's logits when it is prefilled alone (its own cache and batch).
  std::vector<std::vector<float>> prefill_logits_alone(const Prompts& prompts,
                                                       int64_t chunk) const {
    std::vector<std::vector<float>> out;
    for (const auto& p : prompts)
      out.push_back(prefill_logits({p}, chunk)[0]);
    return out;
  }

  // Greedy continuation of `steps` tokens per prompt, all prompts decoded in one batch per step.
  // The last-position logits of each step are appended to `step_logits` when given.
  Prompts greedy(const Prompts& prompts, int64_t steps,
                 std::vector<std::vector<float>>* step_logits = nullptr) const {
    const int64_t vocab = model.vocab_size();
    KvCache cache = fresh_cache(static_cast<int64_t>(prompts.size()));
    Prompts generated(prompts.size());
    std::vector<int64_t> computed(prompts.size(), 0);
    if (step_logits) step_logits->assign(prompts.size(), {});
    for (int64_t step = 0; step < steps; ++step) {
      ForwardBatchBuilder builder(static_cast<int>(block_size));
      for (size_t i = 0; i < prompts.size(); ++i) {
        std::vector<int32_t> all = prompts[i];
        all.insert(all.end(), generated[i].begin(), generated[i].end());
        const auto blocks = blocks_of(static_cast<int64_t>(i), blocks_per_seq());
        EXPECT_TRUE(builder
                        .add_sequence(std::span(all).subspan(computed[i]), computed[i], blocks,
                                      LogitsFor::kLastToken)
                        .is_ok());
        computed[i] = static_cast<int64_t>(all.size());
      }
      ForwardBatch batch = std::move(builder).build();
      auto out = model.forward(batch, cache);
      EXPECT_TRUE(out.has_value()) << out.status().to_string();
      if (!out) return generated;
      for (size_t i = 0; i < prompts.size(); ++i) {
        const float* row = out->data<float>() + static_cast<int64_t>(i) * vocab;
        // torch.argmax: the first maximum wins.
        generated[i].push_back(static_cast<int32_t>(std::max_element(row, row + vocab) - row));
        if (step_logits) (*step_logits)[i].insert((*step_logits)[i].end(), row, row + vocab);
      }
    }
    return generated;
  }
};

}  // namespace locus::testing
