#include "core/progress.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>

namespace locus {

Progress::Progress(std::string label, int64_t total, std::string unit, Mode mode, std::FILE* out)
    : label_(std::move(label)),
      total_(std::max<int64_t>(total, 1)),
      unit_(std::move(unit)),
      mode_(mode),
      out_(out) {
  if (mode_ == Mode::kAuto) mode_ = isatty(fileno(out_)) != 0 ? Mode::kBar : Mode::kLines;
}

double Progress::elapsed_s() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

std::string Progress::render() const {
  constexpr int kWidth = 30;
  const int64_t done = std::min(done_, total_);
  const int filled = static_cast<int>(kWidth * done / total_);
  std::string bar(static_cast<size_t>(filled), '#');
  bar.resize(kWidth, ' ');
  const double t = elapsed_s();
  std::string rate;
  if (bytes_ > 0 && t > 0)
    rate = fmt::format(", {:.2f} GB/s", static_cast<double>(bytes_) / 1e9 / t);
  return fmt::format("{} {:3d}% |{}| {}/{} {} [{:.1f} s{}]", label_,
                     static_cast<int>(100 * done / total_), bar, done, total_, unit_, t, rate);
}

void Progress::advance(int64_t n, uint64_t bytes) {
  if (finished_) return;
  done_ += n;
  bytes_ += bytes;
  if (mode_ == Mode::kBar) {
    // At most ~10 redraws a second: a terminal write per layer would cost more than the layer.
    const auto now = std::chrono::steady_clock::now();
    if (done_ < total_ && now - last_draw_ < std::chrono::milliseconds(100)) return;
    last_draw_ = now;
    std::fprintf(out_, "\r%s", render().c_str());
    std::fflush(out_);
  } else if (mode_ == Mode::kLines) {
    while (next_quarter_ <= 4 && done_ * 4 >= total_ * next_quarter_) {
      ++next_quarter_;
      std::fprintf(out_, "%s\n", render().c_str());
    }
  }
}

void Progress::finish() {
  if (finished_) return;
  finished_ = true;
  if (mode_ == Mode::kBar) {
    std::fprintf(out_, "\r%s\n", render().c_str());
    std::fflush(out_);
  } else if (mode_ == Mode::kLines && next_quarter_ <= 4) {
    std::fprintf(out_, "%s\n", render().c_str());  // stopped early: say where
  }
}

}  // namespace locus
