// fabtests' functional/cq_data on sf_*: a 1000-byte sf_senddata carrying
// remote CQ data; the receiver's entry (fi_cq_data_entry format) has flags
// exactly SF_MSG | SF_RECV | SF_REMOTE_CQ_DATA, the data, and len 1000. RDM
// (the receiver's CQ in SF_CQ_FORMAT_DATA, as the program opens it) and MSG.
// Left out: the program's -o writedata variant (fi_writedata: softfab
// offers no RMA operations).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "api/softfab/fabric.h"
#include "tests/fabtests/functional/fabtests_harness.h"

namespace softfab::fabtests {
namespace {

constexpr size_t kSize = 1000;
// fabtests' remote_cq_data: the domain's cq_data_size is 8 bytes here.
constexpr uint64_t kData = 0x0123456789abcdefull;

class FabtestsCqData : public ::softfab::testing::PerBackendTest {};

// Sends from f.peers[0] to `to` (the address of receiver `rx` in peer 0's
// AV) and checks the receiver's data-format entry.
void SendData(Fixture& f, int rx, sf_addr_t to, void* entry_buf) {
  const std::vector<uint8_t> out = Pattern(kSize, 5);
  std::vector<uint8_t> in(kSize, 0);
  int rctx = 0, sctx = 0;
  ASSERT_EQ(sf_recv(f.peers[rx].ep, in.data(), in.size(), nullptr,
                    SF_ADDR_UNSPEC, &rctx),
            0);
  ASSERT_EQ(sf_senddata(f.peers[0].ep, out.data(), out.size(), nullptr, kData,
                        to, &sctx),
            0)
      << sf_last_error();
  ssize_t n = -SF_EAGAIN;
  for (int r = 0; r < 200000 && n == -SF_EAGAIN; ++r) {
    n = sf_cq_read(f.peers[rx].cq, entry_buf, 1);
    if (n == -SF_EAGAIN) f.Progress();
  }
  if (n == -SF_EAVAIL) FAIL() << ErrorEntry(f.peers[rx].cq);
  ASSERT_EQ(n, 1);
  const auto* e = static_cast<const sf_cq_data_entry*>(entry_buf);
  EXPECT_EQ(e->op_context, &rctx);
  EXPECT_EQ(e->flags, SF_MSG | SF_RECV | SF_REMOTE_CQ_DATA);
  EXPECT_EQ(e->data, kData);
  EXPECT_EQ(e->len, kSize);
  EXPECT_TRUE(SameBytes(in.data(), out));
  ASSERT_TRUE(Completes(f, 0, &sctx));
}

TEST_P(FabtestsCqData, RdmDataFormatEntry) {
  Fixture f;
  ASSERT_TRUE(OpenPair(f, backend(), SF_EP_RDM));
  std::vector<uint8_t> name;
  ASSERT_TRUE(AddPeer(f, 1, SF_EP_RDM, SF_MSG, SF_CQ_FORMAT_DATA, &name));
  sf_addr_t to = SF_ADDR_NOTAVAIL;
  ASSERT_EQ(sf_av_insert(f.peers[0].av, name.data(), 1, &to, 0, nullptr), 1);
  // A data-format entry and a guard after it: the CQ writes no more.
  struct {
    sf_cq_data_entry entry;
    uint8_t guard[16];
  } buf;
  std::memset(&buf, 0xA5, sizeof buf);
  SendData(f, 2, to, &buf.entry);
  for (uint8_t g : buf.guard) EXPECT_EQ(g, 0xA5);
  EXPECT_TRUE(DropPeer(f));
}

TEST_P(FabtestsCqData, MsgEndpoint) {
  Fixture f;
  ASSERT_TRUE(OpenPair(f, backend(), SF_EP_MSG));
  sf_cq_tagged_entry e{};
  SendData(f, 1, f.peers[0].addr[1], &e);
}

SOFTFAB_INSTANTIATE_PER_BACKEND(FabtestsCqData);

}  // namespace
}  // namespace softfab::fabtests
