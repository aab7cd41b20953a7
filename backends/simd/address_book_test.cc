// The fabric daemon's address book: which binding a lookup finds.
#include "backends/simd/address_book.h"

#include <gtest/gtest.h>

namespace softfab::simd {
namespace {

EndpointName NameOf(uint8_t tag) {
  EndpointName n{};
  n[0] = tag;
  return n;
}

// Owners are the addresses of these ints; their node is the int's value.
int node0 = 0, node1 = 1;
AddressBook Book() {
  return AddressBook(
      [](const void* owner) { return *static_cast<const int*>(owner); });
}

TEST(AddressBookTest, BindingsConflictOnTheSamePortAndAddress) {
  AddressBook book = Book();
  const uint32_t a = AddressBook::NodeAddress(0);
  const uint32_t b = AddressBook::NodeAddress(1);
  EXPECT_TRUE(book.Bind(&node0, a, 7471, NameOf(1)));
  EXPECT_FALSE(book.Bind(&node1, a, 7471, NameOf(2)));  // same address
  EXPECT_FALSE(book.Bind(&node1, 0, 7471, NameOf(2)));  // any covers a
  EXPECT_TRUE(book.Bind(&node1, b, 7471, NameOf(3)));   // another address
  EXPECT_TRUE(book.Bind(&node1, 0, 7472, NameOf(4)));
  EXPECT_FALSE(book.Bind(&node0, a, 7472, NameOf(5)));  // any bound first
}

TEST(AddressBookTest, LookupsByNodeAddressAndByHostAddress) {
  AddressBook book = Book();
  ASSERT_TRUE(book.Bind(&node1, 0, 7471, NameOf(1)));
  ASSERT_TRUE(book.Bind(&node0, AddressBook::NodeAddress(0), 7472, NameOf(2)));
  // A node's own address reaches its any-address listener; another node's
  // does not.
  EXPECT_EQ(book.Find(AddressBook::NodeAddress(1), 7471), NameOf(1));
  EXPECT_EQ(book.Find(AddressBook::NodeAddress(0), 7471), std::nullopt);
  EXPECT_EQ(book.Find(AddressBook::NodeAddress(0), 7472), NameOf(2));
  // 127.0.0.1 (or the host's address): every process is on one host.
  const uint32_t loopback = 0x7F000001;
  EXPECT_EQ(book.Find(loopback, 7471), NameOf(1));
  EXPECT_EQ(book.Find(loopback, 7472), NameOf(2));
  EXPECT_EQ(book.Find(loopback, 7473), std::nullopt);
  book.Unbind(&node1);
  EXPECT_EQ(book.Find(loopback, 7471), std::nullopt);
  EXPECT_EQ(book.Find(loopback, 7472), NameOf(2));
}

TEST(AddressBookTest, NodeAddressesRoundTrip) {
  EXPECT_EQ(AddressBook::NodeAddress(5), 0x0A000005u);
  EXPECT_EQ(AddressBook::NodeOfAddress(0x0A000005u), 5);
  EXPECT_EQ(AddressBook::NodeOfAddress(0x7F000001u), -1);
}

}  // namespace
}  // namespace softfab::simd
