// fabtests functional/cm_data on sf_*: private data on connection requests,
// rejections and accepts, at every power of two up to the most a connection
// carries (SF_OPT_CM_DATA_SIZE, asked of the passive and the active
// endpoint) and at that most, and one byte more refused by sf_connect. Each
// size is tried twice, with a fresh connecting endpoint each time (a
// connection is made once in an endpoint's life): once rejected, the data
// coming back in the connector's SF_ECONNREFUSED error event, once accepted,
// the data in its SF_CONNECTED event (the accepting side's has none); then
// the connection is shut down and both sides see SF_SHUTDOWN.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "tests/fabtests/unit/unit_util.h"

namespace softfab::fabtests {
namespace {

class FabtestsCmData : public FabtestsCase {
 protected:
  void SetUp() override {
    PerBackendTest::SetUp();
    if (IsSkipped()) return;
    ASSERT_TRUE(f.Open(backend(), 2));
    ASSERT_TRUE(server_.Open(f, closer_));
    ASSERT_EQ(sf_eq_open(f.fabric, nullptr, &client_eq_, nullptr), 0);
    closer_.Add(&client_eq_->fid);
  }

  // A new connecting endpoint on node 1; returns its SF_OPT_CM_DATA_SIZE.
  size_t NewClient() {
    clients_.push_back(std::make_unique<MsgEndpoint>());
    EXPECT_TRUE(clients_.back()->Open(f, closer_, 1, client_eq_));
    size_t size = 0, len = sizeof size;
    EXPECT_EQ(sf_getopt(&client()->fid, SF_OPT_ENDPOINT, SF_OPT_CM_DATA_SIZE,
                        &size, &len),
              0);
    return size;
  }
  sf_ep* client() { return clients_.back()->ep; }
  std::vector<sf_cq*> Cqs() {
    std::vector<sf_cq*> cqs;
    for (auto& c : clients_) cqs.push_back(c->cq);
    for (auto& s : accepted_) cqs.push_back(s->cq);
    return cqs;
  }

  // The client connects with `len` bytes of data; the listener's request
  // carries them. Returns the request's info (the caller's).
  sf_info* Request(size_t len, uint32_t seed) {
    const std::vector<uint8_t> data = Pattern(len, seed);
    EXPECT_EQ(sf_connect(client(), server_.name, data.data(), len), 0)
        << sf_last_error();
    CmEvent ev;
    uint32_t event = 0;
    EXPECT_EQ(
        ReadEq(f, server_.eq, &event, ev.bytes, sizeof ev.bytes, 0, Cqs()),
        static_cast<ssize_t>(sizeof(sf_eq_cm_entry) + len))
        << sf_last_error();
    EXPECT_EQ(event, static_cast<uint32_t>(SF_CONNREQ));
    EXPECT_EQ(ev.entry()->fid, &server_.pep->fid);
    EXPECT_EQ(std::memcmp(ev.entry()->data, data.data(), len), 0);
    return ev.entry()->info;
  }

  // server_reject / client_expect_reject.
  void Reject(size_t len) {
    NewClient();
    sf_info* info = Request(len, 1);
    ASSERT_NE(info, nullptr);
    const std::vector<uint8_t> back = Pattern(len, 2);
    EXPECT_EQ(sf_reject(server_.pep, info, back.data(), len), 0)
        << sf_last_error();
    sf_freeinfo(info);
    CmEvent ev;
    uint32_t event = 0;
    // The listener answers the connector's retries (a lost rejection) only
    // while its queue is read: drive it too.
    ASSERT_EQ(ReadEq(f, client_eq_, &event, ev.bytes, sizeof ev.bytes, 0, Cqs(),
                     {server_.eq}),
              -SF_EAVAIL);
    sf_eq_err_entry err{};
    ASSERT_EQ(sf_eq_readerr(client_eq_, &err, 0),
              static_cast<ssize_t>(sizeof err));
    EXPECT_EQ(err.err, SF_ECONNREFUSED);
    EXPECT_EQ(err.fid, &client()->fid);
    ASSERT_EQ(err.err_data_size, len);
    EXPECT_EQ(std::memcmp(err.err_data, back.data(), len), 0);
  }

  // server_accept / client_expect_accept, then both shut down.
  void Accept(size_t len) {
    NewClient();
    sf_info* info = Request(len, 3);
    ASSERT_NE(info, nullptr);
    accepted_.push_back(std::make_unique<MsgEndpoint>());
    MsgEndpoint& s = *accepted_.back();
    auto opened = s.Open(f, closer_, 0, server_.eq, info);
    sf_freeinfo(info);
    ASSERT_TRUE(opened);
    const std::vector<uint8_t> back = Pattern(len, 4);
    ASSERT_EQ(sf_accept(s.ep, back.data(), len), 0) << sf_last_error();
    CmEvent ev;
    uint32_t event = 0;
    // The accepting side's SF_CONNECTED has no data.
    EXPECT_EQ(
        ReadEq(f, server_.eq, &event, ev.bytes, sizeof ev.bytes, 0, Cqs()),
        static_cast<ssize_t>(sizeof(sf_eq_cm_entry)));
    EXPECT_EQ(event, static_cast<uint32_t>(SF_CONNECTED));
    EXPECT_EQ(ev.entry()->fid, &s.ep->fid);
    EXPECT_EQ(
        ReadEq(f, client_eq_, &event, ev.bytes, sizeof ev.bytes, 0, Cqs()),
        static_cast<ssize_t>(sizeof(sf_eq_cm_entry) + len));
    EXPECT_EQ(event, static_cast<uint32_t>(SF_CONNECTED));
    EXPECT_EQ(ev.entry()->fid, &client()->fid);
    EXPECT_EQ(std::memcmp(ev.entry()->data, back.data(), len), 0);

    // Both sides shut down (as fabtests' server and client each do once
    // connected), then each sees SF_SHUTDOWN: read_shutdown_event.
    EXPECT_EQ(sf_shutdown(s.ep, 0), 0) << sf_last_error();
    EXPECT_EQ(sf_shutdown(client(), 0), 0) << sf_last_error();
    for (auto [eq, ep] :
         {std::pair{client_eq_, client()}, std::pair{server_.eq, s.ep}}) {
      ASSERT_EQ(ReadEq(f, eq, &event, ev.bytes, sizeof ev.bytes, 0, Cqs()),
                static_cast<ssize_t>(sizeof(sf_eq_cm_entry)))
          << (eq == client_eq_ ? "client: " : "server: ") << sf_last_error();
      EXPECT_EQ(event, static_cast<uint32_t>(SF_SHUTDOWN));
      EXPECT_EQ(ev.entry()->fid, &ep->fid);
    }
  }

  Closer closer_;
  Listener server_;
  sf_eq* client_eq_ = nullptr;
  std::vector<std::unique_ptr<MsgEndpoint>> clients_;
  std::vector<std::unique_ptr<MsgEndpoint>> accepted_;
};

TEST_P(FabtestsCmData, RejectAndAcceptCarryData) {
  // server_setup: the passive endpoint answers SF_OPT_CM_DATA_SIZE.
  size_t max = 0, len = sizeof max;
  ASSERT_EQ(sf_getopt(&server_.pep->fid, SF_OPT_ENDPOINT, SF_OPT_CM_DATA_SIZE,
                      &max, &len),
            0)
      << sf_last_error();
  ASSERT_EQ(max, 56u);
  std::vector<size_t> sizes;
  for (size_t n = 1; n <= max; n <<= 1) sizes.push_back(n);
  sizes.push_back(max);
  for (size_t n : sizes) {
    SCOPED_TRACE(n);
    Reject(n);
    Accept(n);
  }
  // One byte more than the most is refused by sf_connect.
  EXPECT_EQ(NewClient(), max);
  const std::vector<uint8_t> data = Pattern(max + 1, 5);
  EXPECT_EQ(sf_connect(client(), server_.name, data.data(), max + 1),
            -SF_EINVAL);
}

// The shutdown cm_data ends with, alone: both sides call sf_shutdown before
// either hears of the other's, and each still gets SF_SHUTDOWN (softfab
// reported it on neither side before).
TEST_P(FabtestsCmData, CrossingShutdownsReachBothSides) { Accept(1); }

SOFTFAB_INSTANTIATE_PER_BACKEND(FabtestsCmData);

}  // namespace
}  // namespace softfab::fabtests
