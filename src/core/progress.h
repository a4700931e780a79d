// A progress report for long host loops (weight loading): a bar redrawn in place on a terminal,
// or a line at each quarter when stderr is a file or a pipe (logs stay readable), like the bars
// vLLM prints while it loads checkpoint shards.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace locus {

class Progress {
 public:
  enum class Mode { kAuto, kBar, kLines, kOff };

  // kAuto: a bar when `out` is a terminal, quarter lines otherwise.
  Progress(std::string label, int64_t total, std::string unit, Mode mode = Mode::kAuto,
           std::FILE* out = stderr);
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;
  ~Progress() { finish(); }

  // `n` more units done, `bytes` more bytes handled (shown as a rate when nonzero).
  void advance(int64_t n = 1, uint64_t bytes = 0);
  // Draws the final state once (called by the destructor too).
  void finish();

  // The text of the current state: "label  50% |#####     | 24/48 layers [1.2 s, 3.4 GB/s]".
  std::string render() const;

 private:
  double elapsed_s() const;

  std::string label_;
  int64_t total_;
  std::string unit_;
  Mode mode_;
  std::FILE* out_;
  int64_t done_ = 0;
  uint64_t bytes_ = 0;
  int next_quarter_ = 1;
  bool finished_ = false;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point last_draw_{};
};

}  // namespace locus
