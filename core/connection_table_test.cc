// The connection table's QP-number map: an arrival is known by the QP number
// it came on, and a device may give a destroyed QP's number to another peer's
// new QP. Forgetting a peer's old number (ResetPeer, core/wireup.cc) must then
// spare the peer that holds it now.
#include "core/connection_table.h"

#include <gtest/gtest.h>

#include <optional>

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

}  // namespace
}  // namespace softfab::core
