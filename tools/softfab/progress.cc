// softfab command line: the progress bar and plain progress lines.
#include "tools/softfab/progress.h"

#include <string>

namespace softfab::cli {
namespace {

constexpr int kBarWidth = 30;
constexpr auto kRedrawEvery = std::chrono::milliseconds(100);

std::string FormatDuration(double seconds) {
  if (seconds < 0 || seconds > 1e7) return "?";
  const auto s = static_cast<uint64_t>(seconds + 0.5);
  char text[32];
  if (s >= 3600) {
    std::snprintf(text, sizeof text, "%lluh%02llum",
                  static_cast<unsigned long long>(s / 3600),
                  static_cast<unsigned long long>(s / 60 % 60));
  } else if (s >= 60) {
    std::snprintf(text, sizeof text, "%llum%02llus",
                  static_cast<unsigned long long>(s / 60),
                  static_cast<unsigned long long>(s % 60));
  } else {
    std::snprintf(text, sizeof text, "%llus",
                  static_cast<unsigned long long>(s));
  }
  return text;
}

}  // namespace

Progress::Progress(uint64_t total, std::FILE* out, bool terminal)
    : total_(total),
      out_(out),
      terminal_(terminal),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {
  next_plain_ = total_ / 10 > 0 ? total_ / 10 : 1;
}

double Progress::ElapsedSeconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                       start_)
      .count();
}

void Progress::Done(bool failed) {
  ++done_;
  if (failed) ++failed_;
  Draw(false);
}

void Progress::Finish() {
  Draw(true);
  if (terminal_) std::fputc('\n', out_);
  std::fflush(out_);
}

void Progress::Draw(bool force) {
  const auto now = std::chrono::steady_clock::now();
  const double elapsed = ElapsedSeconds();
  const double rate = elapsed > 0 ? static_cast<double>(done_) / elapsed : 0;
  const double eta =
      rate > 0 ? static_cast<double>(total_ - done_) / rate : -1.0;
  if (terminal_) {
    if (!force && now - last_draw_ < kRedrawEvery && done_ != total_) return;
    last_draw_ = now;
    const int filled =
        total_ ? static_cast<int>(kBarWidth * done_ / total_) : kBarWidth;
    std::string bar(static_cast<size_t>(filled), '#');
    bar.resize(kBarWidth, '.');
    std::fprintf(
        out_, "\r[%s] %llu/%llu runs  %.1f/s  ETA %s  failures %llu\x1b[K",
        bar.c_str(), static_cast<unsigned long long>(done_),
        static_cast<unsigned long long>(total_), rate,
        FormatDuration(eta).c_str(), static_cast<unsigned long long>(failed_));
    std::fflush(out_);
    return;
  }
  if (!force && done_ < next_plain_) return;
  while (next_plain_ <= done_) next_plain_ += total_ / 10 > 0 ? total_ / 10 : 1;
  if (force && done_ == last_plain_done_) return;
  last_plain_done_ = done_;
  std::fprintf(out_,
               "progress: %llu/%llu runs, %llu failures, %.1f runs/s, "
               "ETA %s\n",
               static_cast<unsigned long long>(done_),
               static_cast<unsigned long long>(total_),
               static_cast<unsigned long long>(failed_), rate,
               FormatDuration(eta).c_str());
  std::fflush(out_);
}

}  // namespace softfab::cli
