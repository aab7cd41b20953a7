// What the daemon sees of a process asleep outside the fabric: bytes queued
// to one of its Unix sockets mean it may be about to wake, unless they came
// from the daemon's own end of its session (a doorbell left over).
#include "backends/simd/outside_processes.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <vector>

#include "gtest/gtest.h"

namespace softfab::simd {
namespace {

unsigned long InodeOf(int fd) {
  struct stat st {};
  EXPECT_EQ(fstat(fd, &st), 0);
  return st.st_ino;
}

class SocketsQuietTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, session_), 0);
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, other_), 0);
  }
  void TearDown() override {
    for (int fd : {session_[0], session_[1], other_[0], other_[1]}) close(fd);
  }
  bool Quiet(std::vector<unsigned long> daemon_ends) {
    const std::vector<pid_t> me = {getpid()};
    return SocketsQuiet(me, me, std::move(daemon_ends));
  }
  int session_[2] = {-1, -1};  // [0]: the daemon's end, [1]: the process's
  int other_[2] = {-1, -1};    // another conversation of the process
};

TEST_F(SocketsQuietTest, NothingQueuedIsQuiet) {
  EXPECT_TRUE(Quiet({}));
  EXPECT_TRUE(Quiet({InodeOf(session_[0])}));
}

TEST_F(SocketsQuietTest, AByteQueuedToASleeperIsNotQuiet) {
  ASSERT_EQ(write(other_[0], "x", 1), 1);
  EXPECT_FALSE(Quiet({}));
  // The daemon's ends change nothing about another conversation's bytes.
  EXPECT_FALSE(Quiet({InodeOf(session_[0])}));
}

TEST_F(SocketsQuietTest, ALeftOverDoorbellFromTheDaemonIsQuiet) {
  ASSERT_EQ(send(session_[0], "\1", 1, 0), 1);
  EXPECT_FALSE(Quiet({}));  // not known to be the daemon's: may wake
  EXPECT_TRUE(Quiet({InodeOf(session_[0])}));
  // Only bytes from the daemon's end are excused.
  ASSERT_EQ(write(other_[0], "x", 1), 1);
  EXPECT_FALSE(Quiet({InodeOf(session_[0])}));
}

TEST_F(SocketsQuietTest, ExcusedByWhoSentThemNotWhereTheyWait) {
  // Here both ends belong to the one process looked at, so bytes the
  // process's end sent wait at a socket of the sleeper's that is itself a
  // daemon end: they were not sent by one, and still count.
  ASSERT_EQ(send(session_[1], "\1", 1, 0), 1);
  EXPECT_FALSE(Quiet({InodeOf(session_[0])}));
}

}  // namespace
}  // namespace softfab::simd
