// softfab command line: study progress on stderr. On a terminal, one line
// redrawn in place (bar, seeds done, rate, ETA, failures so far); otherwise a
// plain line at every tenth of the work, so logs stay short and readable.
// Uses the wall clock, which is fine here: it only reports, never decides.
#ifndef SOFTFAB_TOOLS_SOFTFAB_PROGRESS_H_
#define SOFTFAB_TOOLS_SOFTFAB_PROGRESS_H_

#include <chrono>
#include <cstdint>
#include <cstdio>

namespace softfab::cli {

class Progress {
 public:
  // `total` runs expected; `out` is where to draw (stderr); `terminal` picks
  // the redrawn bar over plain lines.
  Progress(uint64_t total, std::FILE* out, bool terminal);

  // Records one finished run; `failed` when it broke an invariant or did not
  // end as the scenario expects.
  void Done(bool failed);
  // Ends the bar with a newline (terminal) or a last line (plain).
  void Finish();

  // Wall-clock seconds since construction.
  double ElapsedSeconds() const;

 private:
  void Draw(bool force);

  uint64_t total_;
  uint64_t done_ = 0;
  uint64_t failed_ = 0;
  uint64_t next_plain_ = 0;  // Plain mode: the count that prints next.
  uint64_t last_plain_done_ = UINT64_MAX;  // Plain mode: count last printed.
  std::FILE* out_;
  bool terminal_;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_;
};

}  // namespace softfab::cli

#endif  // SOFTFAB_TOOLS_SOFTFAB_PROGRESS_H_
