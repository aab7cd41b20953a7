// Tests of study progress output: plain lines at each tenth, a redrawn bar on
// a terminal, failures counted in both.
#include "tools/softfab/progress.h"

#include <gtest/gtest.h>

#include <string>

namespace softfab::cli {
namespace {

std::string Drive(bool terminal, int total, int failed_every) {
  std::FILE* f = std::tmpfile();
  {
    Progress p(total, f, terminal);
    for (int i = 1; i <= total; ++i) p.Done(i % failed_every == 0);
    p.Finish();
  }
  std::rewind(f);
  std::string text;
  char chunk[4096];
  size_t n;
  while ((n = std::fread(chunk, 1, sizeof chunk, f)) > 0) text.append(chunk, n);
  std::fclose(f);
  return text;
}

int Count(const std::string& text, char c) {
  int n = 0;
  for (char x : text) n += x == c;
  return n;
}

TEST(ProgressTest, PlainLinesAtEachTenth) {
  const std::string text = Drive(false, 1000, 100);
  EXPECT_EQ(Count(text, '\n'), 10) << text;
  EXPECT_EQ(Count(text, '\r'), 0);
  EXPECT_NE(text.find("progress: 100/1000 runs, 1 failures"), std::string::npos)
      << text;
  EXPECT_NE(text.find("progress: 1000/1000 runs, 10 failures"),
            std::string::npos)
      << text;
}

TEST(ProgressTest, PlainLinesForFewRuns) {
  const std::string text = Drive(false, 3, 2);
  EXPECT_EQ(Count(text, '\n'), 3) << text;
  EXPECT_NE(text.find("progress: 3/3 runs, 1 failures"), std::string::npos);
}

TEST(ProgressTest, TerminalBarEndsFullWithOneNewline) {
  const std::string text = Drive(true, 50, 10);
  EXPECT_EQ(Count(text, '\n'), 1);
  const std::string last = text.substr(text.rfind('\r'));
  EXPECT_NE(last.find("[##############################] 50/50 runs"),
            std::string::npos)
      << last;
  EXPECT_NE(last.find("failures 5"), std::string::npos) << last;
  EXPECT_NE(last.find("ETA 0s"), std::string::npos) << last;
}

}  // namespace
}  // namespace softfab::cli
