// The connection table's QP-number map: an arrival is known by the QP number
// it came on, and a device may give a destroyed QP's number to another peer's
// new QP. Forgetting a peer's old number (ResetPeer, core/wireup.cc) must then
// spare the peer that holds it now.
#include "core/connection_table.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "core/wire.h"

namespace softfab::core {
namespace {

wire::Name NameOf(uint32_t cm_qpn) {
  wire::Name n;
  n.cm_qpn = cm_qpn;
  return n;
}

TEST(ConnectionTableTest, ForgettingAnOldNumberSparesThePeerThatHoldsItNow) {
  ConnectionTable t;
  const uint32_t a = t.FindOrAdd(NameOf(10));
  const uint32_t b = t.FindOrAdd(NameOf(20));
  ASSERT_NE(a, b);
  // A's first connection had QP 100; destroyed, its number went to B's new
  // connection. A's later reset forgets its number before the previous one.
  t.SetQpn(100, a);
  EXPECT_EQ(t.ByQpn(100), std::optional<uint32_t>(a));
  t.SetQpn(100, b);
  EXPECT_EQ(t.ByQpn(100), std::optional<uint32_t>(b));
  t.ForgetQpn(100, a);
  EXPECT_EQ(t.ByQpn(100), std::optional<uint32_t>(b));
  // B's own reset does forget it, and the lookup's kept answer goes too.
  t.ForgetQpn(100, b);
  EXPECT_EQ(t.ByQpn(100), std::nullopt);
}

TEST(ConnectionTableTest, ForgettingANumberDropsTheKeptAnswer) {
  ConnectionTable t;
  const uint32_t a = t.FindOrAdd(NameOf(10));
  t.SetQpn(7, a);
  ASSERT_EQ(t.ByQpn(7), std::optional<uint32_t>(a));  // now the kept answer
  t.ForgetQpn(7, a);
  EXPECT_EQ(t.ByQpn(7), std::nullopt);
  EXPECT_EQ(t.ByQpn(8), std::nullopt);  // never known
}

// The QP-number index against std::map, over a fixed pseudo-random sequence
// of connections made, numbers given again and resets: every number's answer
// agrees after every step (a sorted array searched without branches gets its
// edges wrong first: the first and last entries, one entry, none).
TEST(ConnectionTableTest, TheQpNumberIndexAgreesWithAMap) {
  ConnectionTable t;
  std::map<uint32_t, uint32_t> model;
  std::vector<uint32_t> peers;
  for (uint32_t i = 0; i < 40; ++i) peers.push_back(t.FindOrAdd(NameOf(i + 1)));
  int forgotten = 0;
  uint32_t x = 7;
  auto next = [&x](uint32_t bound) {
    x = x * 1664525u + 1013904223u;
    return (x >> 8) % bound;
  };
  for (int step = 0; step < 4000; ++step) {
    const uint32_t qpn = next(64);  // few numbers: they are given again
    uint32_t peer = peers[next(static_cast<uint32_t>(peers.size()))];
    if (next(3) == 0) {
      // Half the resets are by the number's holder (they forget it), half by
      // a peer whose old number was given to another (they must not).
      if (auto held = model.find(qpn); held != model.end() && next(2) == 0) {
        peer = held->second;
      }
      t.ForgetQpn(qpn, peer);
      auto it = model.find(qpn);
      if (it != model.end() && it->second == peer) {
        model.erase(it);
        ++forgotten;
      }
    } else {
      t.SetQpn(qpn, peer);
      model[qpn] = peer;
    }
    for (uint32_t q = 0; q < 66; ++q) {
      auto it = model.find(q);
      const std::optional<uint32_t> want =
          it == model.end() ? std::nullopt
                            : std::optional<uint32_t>(it->second);
      ASSERT_EQ(t.ByQpn(q), want) << "step " << step << ", QP number " << q;
    }
  }
  EXPECT_FALSE(model.empty());
  EXPECT_GT(forgotten, 100);  // the resets did remove numbers
}

}  // namespace
}  // namespace softfab::core
