// Tests of the forked worker pool: every task answered exactly once, crashes
// reported and survived, determinism passes spread over workers.
#include "tools/softfab/worker_pool.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <csignal>
#include <map>
#include <set>

namespace softfab::cli {
namespace {

std::vector<SeedTask> Tasks(uint64_t n, bool twice) {
  std::vector<SeedTask> tasks;
  for (uint64_t s = 1; s <= n; ++s) tasks.push_back({s, 0});
  if (twice) {
    for (uint64_t s = 1; s <= n; ++s) tasks.push_back({s, 1});
  }
  return tasks;
}

TEST(WorkerPoolTest, EveryTaskAnsweredOnceInAWorkerProcess) {
  const pid_t parent = getpid();
  std::map<uint64_t, std::string> answers;
  std::string error;
  ASSERT_TRUE(RunInWorkers(
      Tasks(50, false), 3,
      [parent](uint64_t seed) {
        // Runs in a child; a newline inside an answer must not split it.
        return std::to_string(seed * seed) + (getpid() == parent ? "!" : "") +
               "\nx";
      },
      [&](const SeedTask& t, std::string line) {
        EXPECT_TRUE(answers.emplace(t.seed, line).second) << t.seed;
      },
      [](const SeedTask& t, const std::string& why) {
        ADD_FAILURE() << t.seed << " " << why;
      },
      &error))
      << error;
  ASSERT_EQ(answers.size(), 50u);
  for (const auto& [seed, line] : answers) {
    EXPECT_EQ(line, std::to_string(seed * seed) + " x");
  }
}

TEST(WorkerPoolTest, ACrashingSeedIsReportedAndTheRestStillRun) {
  std::set<uint64_t> answered;
  std::map<uint64_t, std::string> crashed;
  std::string error;
  ASSERT_TRUE(RunInWorkers(
      Tasks(20, false), 2,
      [](uint64_t seed) -> std::string {
        // SIGKILL: sanitizers turn other signals into an exit status.
        if (seed == 7 || seed == 20) raise(SIGKILL);
        if (seed == 11) _exit(3);
        return "ok";
      },
      [&](const SeedTask& t, std::string) { answered.insert(t.seed); },
      [&](const SeedTask& t, const std::string& why) { crashed[t.seed] = why; },
      &error))
      << error;
  EXPECT_EQ(answered.size(), 17u);
  ASSERT_EQ(crashed.size(), 3u);
  EXPECT_NE(crashed[7].find("signal 9"), std::string::npos) << crashed[7];
  EXPECT_NE(crashed[20].find("signal 9"), std::string::npos) << crashed[20];
  EXPECT_NE(crashed[11].find("status 3"), std::string::npos) << crashed[11];
}

TEST(WorkerPoolTest, SecondPassRunsInAnotherWorker) {
  std::map<uint64_t, std::string> first, second;
  std::string error;
  ASSERT_TRUE(RunInWorkers(
      Tasks(30, true), 2, [](uint64_t) { return std::to_string(getpid()); },
      [&](const SeedTask& t, std::string line) {
        (t.pass == 0 ? first : second)[t.seed] = line;
      },
      [](const SeedTask&, const std::string& why) { ADD_FAILURE() << why; },
      &error))
      << error;
  ASSERT_EQ(first.size(), 30u);
  ASSERT_EQ(second.size(), 30u);
  for (const auto& [seed, pid] : first) {
    EXPECT_NE(second[seed], pid)
        << "seed " << seed << " ran twice in one process";
  }
}

TEST(WorkerPoolTest, RefusesABadJobCount) {
  std::string error;
  auto work = [](uint64_t) { return std::string(); };
  auto answer = [](const SeedTask&, std::string) {};
  auto crash = [](const SeedTask&, const std::string&) {};
  EXPECT_FALSE(RunInWorkers(Tasks(1, false), 0, work, answer, crash, &error));
  EXPECT_FALSE(
      RunInWorkers(Tasks(1, false), kJobsMax + 1, work, answer, crash, &error));
}

}  // namespace
}  // namespace softfab::cli
