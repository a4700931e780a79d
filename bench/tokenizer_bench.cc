// Tokenizer throughput: encode and decode MB/s of a ~1 MB mixed text (English prose, code, CJK)
// for each real tokenizer of scripts/fetch_test_data.sh, single-threaded, to compare with HF
// tokenizers (Rust) on the same text: set LOCUS_BENCH_TEXT_OUT=/path/text.txt to write the text
// out, then run tools/golden/tokenizer/bench_python.py on it where `tokenizers` is installed.
//
//   scripts/fetch_test_data.sh && build/<dir>/bench/tokenizer_bench
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "tokenizer/incremental_detokenizer.h"
#include "tokenizer/tokenizer.h"

namespace {

namespace fs = std::filesystem;

fs::path data_dir() {
  if (const char* dir = std::getenv("LOCUS_TOKENIZER_DATA_DIR")) return dir;
  return fs::path(__FILE__).parent_path().parent_path() / "build" / "test-data" / "tokenizers";
}

const char* const kWords[] = {"the",
                              "of",
                              "and",
                              "to",
                              "in",
                              "is",
                              "that",
                              "for",
                              "it",
                              "as",
                              "was",
                              "with",
                              "be",
                              "by",
                              "on",
                              "not",
                              "he",
                              "this",
                              "are",
                              "or",
                              "his",
                              "from",
                              "at",
                              "which",
                              "but",
                              "have",
                              "an",
                              "had",
                              "they",
                              "you",
                              "were",
                              "their",
                              "one",
                              "all",
                              "we",
                              "can",
                              "her",
                              "has",
                              "there",
                              "been",
                              "if",
                              "more",
                              "when",
                              "will",
                              "would",
                              "who",
                              "so",
                              "no",
                              "model",
                              "expert",
                              "token",
                              "attention",
                              "cache",
                              "memory",
                              "request",
                              "scheduler",
                              "throughput",
                              "latency",
                              "kernel",
                              "inference",
                              "language",
                              "mixture",
                              "routing",
                              "weights",
                              "tensor",
                              "parallel",
                              "batch",
                              "sequence",
                              "decoder",
                              "encoder",
                              "layer",
                              "hidden",
                              "dimension",
                              "quantization",
                              "precision",
                              "benchmark",
                              "server",
                              "client",
                              "streaming",
                              "response",
                              "prompt",
                              "generation",
                              "sampling",
                              "temperature",
                              "probability",
                              "distribution",
                              "vocabulary",
                              "embedding",
                              "gradient",
                              "optimizer",
                              "understanding",
                              "nevertheless",
                              "approximately",
                              "international",
                              "responsibility",
                              "don't",
                              "it's",
                              "we're",
                              "they've",
                              "I'm",
                              "you'll",
                              "Hopper",
                              "NVIDIA",
                              "Qwen",
                              "DeepSeek"};

const char* const kCjk[] = {
    "的", "一", "是", "在", "不", "了", "有", "和", "人",   "这",   "中",   "大", "为", "上",
    "个", "国", "我", "以", "要", "他", "时", "来", "用",   "们",   "生",   "到", "作", "地",
    "于", "出", "就", "分", "对", "成", "会", "可", "主",   "发",   "年",   "动", "同", "工",
    "也", "能", "下", "过", "子", "说", "产", "种", "面",   "而",   "方",   "后", "多", "定",
    "行", "学", "法", "所", "民", "得", "经", "十", "模",   "型",   "推",   "理", "服", "务",
    "器", "专", "家", "混", "合", "语", "言", "计", "算",   "数",   "の",   "に", "は", "を",
    "た", "が", "で", "て", "と", "し", "れ", "さ", "ある", "いる", "する", "テ", "キ", "ス",
    "ト", "デ", "ー", "タ", "한", "국", "어", "모", "델"};

// A deterministic ~1 MB mix: about half prose, 30% code, 20% CJK, in alternating blocks.
std::string make_text(size_t target_bytes) {
  std::mt19937 rng(12345);
  auto word = [&] { return std::string(kWords[rng() % std::size(kWords)]); };
  std::string text;
  while (text.size() < target_bytes) {
    // Prose paragraph.
    for (int s = 0; s < 6; ++s) {
      int words = 8 + static_cast<int>(rng() % 14);
      for (int w = 0; w < words; ++w) {
        std::string next = word();
        if (w == 0) next[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(next[0])));
        text += next;
        if (rng() % 11 == 0) text += std::to_string(rng() % 100000);
        text += w + 1 == words ? ". " : (rng() % 9 == 0 ? ", " : " ");
      }
    }
    text += "\n\n";
    // Code block.
    for (int line = 0; line < 8; ++line) {
      std::string name = word() + "_" + word();
      switch (rng() % 4) {
        case 0:
          text += "def " + name + "(x, y=" + std::to_string(rng() % 10) +
                  "):\n    return x * y + " + std::to_string(rng() % 1000) + "\n";
          break;
        case 1:
          text +=
              "    for (int i = 0; i < " + name + ".size(); ++i) { total += " + name + "[i]; }\n";
          break;
        case 2:
          text += "const " + name + " = await fetch(`/api/" + word() + "?id=${id}`);\n";
          break;
        default:
          text += "\t" + name + " = {\"" + word() + "\": [" + std::to_string(rng() % 100) +
                  ", null, true]}  # " + word() + "\n";
          break;
      }
    }
    text += "\n";
    // CJK paragraph.
    int chars = 60 + static_cast<int>(rng() % 80);
    for (int c = 0; c < chars; ++c) {
      text += kCjk[rng() % std::size(kCjk)];
      if (rng() % 17 == 0) text += "，";
    }
    text += "。\n\n";
  }
  return text;
}

const std::string& bench_text() {
  static const std::string text = [] {
    std::string t = make_text(1 << 20);
    if (const char* out = std::getenv("LOCUS_BENCH_TEXT_OUT"))
      std::ofstream(out, std::ios::binary) << t;
    return t;
  }();
  return text;
}

const locus::Tokenizer* tokenizer(const std::string& name) {
  static std::map<std::string, std::unique_ptr<locus::Tokenizer>> loaded;
  auto it = loaded.find(name);
  if (it != loaded.end()) return it->second.get();
  auto result = locus::Tokenizer::load(data_dir() / name);
  if (!result) {
    std::fprintf(stderr, "%s: %s (run scripts/fetch_test_data.sh)\n", name.c_str(),
                 result.error().message().c_str());
    loaded[name] = nullptr;
    return nullptr;
  }
  return (loaded[name] = std::make_unique<locus::Tokenizer>(std::move(*result))).get();
}

void BM_Encode(benchmark::State& state, const std::string& name) {
  const auto* t = tokenizer(name);
  if (t == nullptr)
    return state.SkipWithError("tokenizer data missing: run scripts/fetch_test_data.sh");
  const std::string& text = bench_text();
  size_t tokens = 0;
  for (auto _ : state) {
    auto ids = t->encode(text, false);
    tokens = ids->size();
    benchmark::DoNotOptimize(ids);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
  state.counters["tokens"] = static_cast<double>(tokens);
  state.counters["bytes/token"] = static_cast<double>(text.size()) / static_cast<double>(tokens);
}

void BM_Decode(benchmark::State& state, const std::string& name) {
  const auto* t = tokenizer(name);
  if (t == nullptr)
    return state.SkipWithError("tokenizer data missing: run scripts/fetch_test_data.sh");
  const std::string& text = bench_text();
  auto ids = *t->encode(text, false);
  for (auto _ : state)
    benchmark::DoNotOptimize(t->decode(ids, false));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
}

void BM_IncrementalDecode(benchmark::State& state, const std::string& name) {
  const auto* t = tokenizer(name);
  if (t == nullptr)
    return state.SkipWithError("tokenizer data missing: run scripts/fetch_test_data.sh");
  const std::string& text = bench_text();
  auto ids = *t->encode(text, false);
  for (auto _ : state) {
    locus::IncrementalDetokenizer stream(*t, false);
    size_t bytes = 0;
    for (auto id : ids)
      bytes += stream.step(id).size();
    bytes += stream.finish().size();
    benchmark::DoNotOptimize(bytes);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
  state.counters["tokens/s"] = benchmark::Counter(static_cast<double>(ids.size()),
                                                  benchmark::Counter::kIsIterationInvariantRate);
}

void BM_Load(benchmark::State& state, const std::string& name) {
  for (auto _ : state) {
    auto result = locus::Tokenizer::load(data_dir() / name);
    if (!result)
      return state.SkipWithError("tokenizer data missing: run scripts/fetch_test_data.sh");
    benchmark::DoNotOptimize(result);
  }
}

const char* const kNames[] = {"qwen3", "deepseek_v3", "llama3_1", "gptoss", "llama2"};

[[maybe_unused]] const bool kRegistered = [] {
  for (const char* name : kNames) {
    benchmark::RegisterBenchmark((std::string("encode/") + name).c_str(), BM_Encode,
                                 std::string(name))
        ->Unit(benchmark::kMillisecond);
  }
  for (const char* name : kNames) {
    benchmark::RegisterBenchmark((std::string("decode/") + name).c_str(), BM_Decode,
                                 std::string(name))
        ->Unit(benchmark::kMillisecond);
  }
  for (const char* name : kNames) {
    benchmark::RegisterBenchmark((std::string("incremental_decode/") + name).c_str(),
                                 BM_IncrementalDecode, std::string(name))
        ->Unit(benchmark::kMillisecond);
  }
  for (const char* name : kNames) {
    benchmark::RegisterBenchmark((std::string("load/") + name).c_str(), BM_Load, std::string(name))
        ->Unit(benchmark::kMillisecond)
        ->Iterations(2);
  }
  return true;
}();

}  // namespace
