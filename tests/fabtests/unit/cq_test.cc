// fabtests unit/cq_test on sf_*: completion queues opened and closed at every
// size from the provider's choice (0) to 2^16, with a wait object where one
// can be had, and many open at once. cq_signal is left out: softfab has no
// sf_cq_signal (fi_cq_signal), so nothing can wake a blocked sf_cq_sread
// but a completion or its timeout.
#include <gtest/gtest.h>

#include <vector>

#include "tests/fabtests/unit/unit_util.h"

namespace softfab::fabtests {
namespace {

class FabtestsCqTest : public FabtestsCase {
 protected:
  // fabtests' create_cq: format unspecified (softfab's default, context),
  // SF_WAIT_UNSPEC first and, should that be refused, no wait object.
  int OpenCq(size_t size, sf_cq** cq) {
    sf_cq_attr attr{};
    attr.size = size;
    attr.format = SF_CQ_FORMAT_CONTEXT;
    attr.wait_obj = SF_WAIT_UNSPEC;
    if (sf_cq_open(f.peers[0].domain, &attr, cq, nullptr) == 0) return 0;
    attr.wait_obj = SF_WAIT_NONE;
    return sf_cq_open(f.peers[0].domain, &attr, cq, nullptr);
  }
};

// cq_open_close_sizes: 0 and 1 to 2^16 entries. fabtests stops quietly at
// the first -EINVAL; softfab takes every size up to 2^24, so none may fail.
TEST_P(FabtestsCqTest, OpenCloseSizes) {
  ASSERT_TRUE(f.Open(backend(), 1));
  for (int i = -1; i < 17; ++i) {
    const size_t size = i < 0 ? 0 : size_t{1} << i;
    sf_cq* cq = nullptr;
    ASSERT_EQ(OpenCq(size, &cq), 0) << size << ": " << sf_last_error();
    // A wait object was granted: it has a descriptor.
    int fd = -1;
    EXPECT_EQ(sf_control(&cq->fid, SF_GETWAIT, &fd), 0) << sf_last_error();
    EXPECT_GE(fd, 0);
    ASSERT_EQ(sf_close(&cq->fid), 0) << sf_last_error();
  }
  // Past the largest size: refused, as fabtests allows.
  sf_cq* cq = nullptr;
  sf_cq_attr attr{};
  attr.size = (size_t{1} << 24) + 1;
  EXPECT_EQ(sf_cq_open(f.peers[0].domain, &attr, &cq, nullptr), -SF_EINVAL);
}

// cq_open_close_simultaneous: fabtests opens up to the domain's cq_cnt at
// once. softfab reports no cq_cnt; 256 (each with a wait object, an eventfd
// of its own on the simulator) must all open, work, and close.
TEST_P(FabtestsCqTest, OpenCloseSimultaneous) {
  ASSERT_TRUE(f.Open(backend(), 1));
  std::vector<sf_cq*> cqs;
  for (int i = 0; i < 256; ++i) {
    sf_cq* cq = nullptr;
    ASSERT_EQ(OpenCq(0, &cq), 0) << "after " << i << ": " << sf_last_error();
    cqs.push_back(cq);
  }
  for (sf_cq* cq : cqs) {
    sf_cq_entry e;
    EXPECT_EQ(sf_cq_read(cq, &e, 1), -SF_EAGAIN);
  }
  for (sf_cq* cq : cqs) EXPECT_EQ(sf_close(&cq->fid), 0) << sf_last_error();
}

SOFTFAB_INSTANTIATE_PER_BACKEND(FabtestsCqTest);

}  // namespace
}  // namespace softfab::fabtests
