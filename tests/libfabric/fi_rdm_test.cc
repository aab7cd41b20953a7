// softfab through libfabric on the simulator, one process: fi_getinfo and
// its hints, then two FI_EP_RDM endpoints (two domains: nodes 0 and 1 of one
// simulated fabric) exchanging messages and tagged messages, every CQ
// format, FI_SOURCE, remote CQ data, peek / claim / discard, FI_MULTI_RECV,
// error entries (fi_cq_readerr, fi_cq_strerror), blocking reads on a wait
// fd, the -FI_ENOSYS stubs, and fabrics made from a scenario file.
#include <poll.h>
#include <rdma/fi_rma.h>

#include <vector>

#include "tests/libfabric/fi_test_util.h"

namespace softfab::fi_test {
namespace {

const auto* const env = ::testing::AddGlobalTestEnvironment(new FiEnvironment);

TEST(FiGetInfo, ListsEveryEndpointTypeOfTheFabric) {
  fi_info* hints = fi_allocinfo();
  hints->fabric_attr->prov_name = strdup("softfab");
  hints->fabric_attr->name = strdup(FabricName());
  hints->mode = ~0ULL;
  fi_info* info = nullptr;
  ASSERT_EQ(fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, hints, &info),
            0);
  int rdm = 0, msg = 0, dgram = 0;
  for (fi_info* i = info; i != nullptr; i = i->next) {
    EXPECT_STREQ(i->fabric_attr->prov_name, "softfab");
    EXPECT_STREQ(i->fabric_attr->name, FabricName());
    rdm += i->ep_attr->type == FI_EP_RDM;
    msg += i->ep_attr->type == FI_EP_MSG;
    dgram += i->ep_attr->type == FI_EP_DGRAM;
  }
  EXPECT_EQ(rdm, 1);
  EXPECT_EQ(msg, 1);
  EXPECT_EQ(dgram, 1);
  fi_freeinfo(info);
  fi_freeinfo(hints);
}

// Open MPI's mtl ofi asks for this; it needs cq_data_size >= 4 and bit 63 of
// mem_tag_format.
TEST(FiGetInfo, MeetsOpenMpiHints) {
  fi_info* h = SimHints(
      FI_EP_RDM, FI_TAGGED | FI_DIRECTED_RECV | FI_LOCAL_COMM | FI_REMOTE_COMM);
  h->mode = FI_CONTEXT | FI_CONTEXT2;
  h->domain_attr->mr_mode = 0;
  h->domain_attr->threading = FI_THREAD_DOMAIN;
  h->domain_attr->av_type = FI_AV_MAP;
  h->domain_attr->resource_mgmt = FI_RM_ENABLED;
  h->tx_attr->msg_order = FI_ORDER_SAS;
  h->rx_attr->msg_order = FI_ORDER_SAS;
  fi_info* info = nullptr;
  ASSERT_EQ(fi_getinfo(FI_VERSION(1, 5), nullptr, nullptr, 0, h, &info), 0);
  EXPECT_EQ(info->ep_attr->type, FI_EP_RDM);
  EXPECT_GE(info->domain_attr->cq_data_size, 4u);
  EXPECT_NE(info->ep_attr->mem_tag_format & (1ULL << 63), 0u);
  EXPECT_EQ(info->domain_attr->mr_mode, 0);
  EXPECT_EQ(info->domain_attr->av_type, FI_AV_MAP);
  EXPECT_EQ(info->caps & (FI_TAGGED | FI_DIRECTED_RECV),
            FI_TAGGED | FI_DIRECTED_RECV);
  fi_freeinfo(info);
  fi_freeinfo(h);
}

TEST(FiGetInfo, HintsItCannotMeetGiveENODATA) {
  struct Case {
    const char* what;
    void (*change)(fi_info*);
  } cases[] = {
      {"RMA", [](fi_info* h) { h->caps |= FI_RMA; }},
      {"atomics", [](fi_info* h) { h->caps |= FI_ATOMIC; }},
      {"auto progress",
       [](fi_info* h) { h->domain_attr->data_progress = FI_PROGRESS_AUTO; }},
      {"thread safe",
       [](fi_info* h) { h->domain_attr->threading = FI_THREAD_SAFE; }},
      {"DGRAM without FI_MSG_PREFIX",
       [](fi_info* h) {
         h->ep_attr->type = FI_EP_DGRAM;
         h->mode = FI_CONTEXT;
       }},
      {"a message above 1 GiB",
       [](fi_info* h) { h->ep_attr->max_msg_size = (1ULL << 30) + 1; }},
      {"a larger inject size",
       [](fi_info* h) { h->tx_attr->inject_size = 4096; }},
      {"another fabric",
       [](fi_info* h) {
         free(h->fabric_attr->name);
         h->fabric_attr->name = strdup("no-such-device");
       }},
      {"sockaddr addressing",
       [](fi_info* h) { h->addr_format = FI_SOCKADDR_IN; }},
  };
  for (const Case& c : cases) {
    fi_info* h = SimHints(FI_EP_RDM, FI_MSG);
    c.change(h);
    fi_info* info = nullptr;
    EXPECT_EQ(fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, h, &info),
              -FI_ENODATA)
        << c.what;
    if (info) fi_freeinfo(info);
    fi_freeinfo(h);
  }
}

// Two RDM endpoints on nodes 0 and 1 of one simulated fabric, each with a
// transmit and a receive CQ of `format`, each knowing the other's address.
struct RdmPair {
  fi_info* info = nullptr;
  fid_fabric* fabric = nullptr;
  struct Side {
    fid_domain* domain = nullptr;
    fid_av* av = nullptr;
    fid_cq* tx = nullptr;
    fid_cq* rx = nullptr;
    fid_ep* ep = nullptr;
    fi_addr_t peer = FI_ADDR_NOTAVAIL;
    fi_addr_t self = FI_ADDR_NOTAVAIL;
  } side[2];
  // With `eq_on_0` set before Open: an event queue bound to side 0's
  // endpoint (its asynchronous errors).
  bool eq_on_0 = false;
  fid_eq* eq = nullptr;

  void Open(uint64_t caps, fi_cq_format format, fi_wait_obj wait = FI_WAIT_NONE,
            bool selective = false, uint64_t mode = 0) {
    fi_info* h = SimHints(FI_EP_RDM, caps);
    if (selective) {
      h->tx_attr->op_flags = FI_COMPLETION;
      h->rx_attr->op_flags = FI_COMPLETION;
    }
    ASSERT_EQ(fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, h, &info), 0);
    fi_freeinfo(h);
    info->mode |= mode;
    ASSERT_EQ(fi_fabric(info->fabric_attr, &fabric, nullptr), 0);
    char names[2][64];
    for (Side& s : side) {
      ASSERT_EQ(fi_domain(fabric, info, &s.domain, nullptr), 0);
      fi_av_attr av_attr{};
      av_attr.type = FI_AV_TABLE;
      ASSERT_EQ(fi_av_open(s.domain, &av_attr, &s.av, nullptr), 0);
      fi_cq_attr cq_attr{};
      cq_attr.format = format;
      cq_attr.wait_obj = wait;
      ASSERT_EQ(fi_cq_open(s.domain, &cq_attr, &s.tx, nullptr), 0);
      ASSERT_EQ(fi_cq_open(s.domain, &cq_attr, &s.rx, nullptr), 0);
      ASSERT_EQ(fi_endpoint(s.domain, info, &s.ep, nullptr), 0);
      ASSERT_EQ(fi_ep_bind(s.ep, &s.av->fid, 0), 0);
      const uint64_t sel = selective ? FI_SELECTIVE_COMPLETION : 0;
      ASSERT_EQ(fi_ep_bind(s.ep, &s.tx->fid, FI_TRANSMIT | sel), 0);
      ASSERT_EQ(fi_ep_bind(s.ep, &s.rx->fid, FI_RECV | sel), 0);
      if (eq_on_0 && &s == &side[0]) {
        fi_eq_attr eq_attr{};
        ASSERT_EQ(fi_eq_open(fabric, &eq_attr, &eq, nullptr), 0);
        ASSERT_EQ(fi_ep_bind(s.ep, &eq->fid, 0), 0);
      }
      ASSERT_EQ(fi_enable(s.ep), 0);
    }
    for (int i = 0; i < 2; ++i) {
      size_t len = 0;
      ASSERT_EQ(fi_getname(&side[i].ep->fid, nullptr, &len), -FI_ETOOSMALL);
      ASSERT_GT(len, 0u);
      ASSERT_LE(len, sizeof names[i]);
      ASSERT_EQ(fi_getname(&side[i].ep->fid, names[i], &len), 0);
    }
    for (int i = 0; i < 2; ++i) {
      ASSERT_EQ(
          fi_av_insert(side[i].av, names[1 - i], 1, &side[i].peer, 0, nullptr),
          1);
      ASSERT_EQ(
          fi_av_insert(side[i].av, names[i], 1, &side[i].self, 0, nullptr), 1);
    }
  }

  ~RdmPair() {
    for (Side& s : side) {
      if (s.ep) EXPECT_EQ(fi_close(&s.ep->fid), 0);
      if (s.tx) EXPECT_EQ(fi_close(&s.tx->fid), 0);
      if (s.rx) EXPECT_EQ(fi_close(&s.rx->fid), 0);
      if (s.av) EXPECT_EQ(fi_close(&s.av->fid), 0);
      if (s.domain) EXPECT_EQ(fi_close(&s.domain->fid), 0);
    }
    if (eq) EXPECT_EQ(fi_close(&eq->fid), 0);
    if (fabric) EXPECT_EQ(fi_close(&fabric->fid), 0);
    if (info) fi_freeinfo(info);
  }
};

TEST(FiRdm, MessagesOfEverySizeArriveWhole) {
  RdmPair p;
  ASSERT_NO_FATAL_FAILURE(p.Open(FI_MSG, FI_CQ_FORMAT_MSG));
  for (size_t len : {size_t{0}, size_t{1}, size_t{100}, size_t{8192},
                     size_t{8193}, size_t{1} << 20, size_t{4} << 20}) {
    std::vector<uint8_t> out(len + 1), in(len + 1, 0);
    Fill(out.data(), len, static_cast<uint32_t>(len));
    fi_context2 rctx, sctx;
    ASSERT_EQ(
        fi_recv(p.side[1].ep, in.data(), len, nullptr, p.side[1].peer, &rctx),
        0);
    ASSERT_EQ(
        fi_send(p.side[0].ep, out.data(), len, nullptr, p.side[0].peer, &sctx),
        0);
    fi_cq_msg_entry e{};
    ASSERT_EQ(ReadOne(p.side[1].rx, &e, p.side[0].tx), 1) << len;
    EXPECT_EQ(e.op_context, &rctx);
    EXPECT_EQ(e.len, len);
    EXPECT_EQ(e.flags, FI_MSG | FI_RECV);
    EXPECT_EQ(FirstBadByte(in.data(), len, static_cast<uint32_t>(len)), len);
    ASSERT_EQ(ReadOne(p.side[0].tx, &e, p.side[1].rx), 1);
    EXPECT_EQ(e.op_context, &sctx);
    EXPECT_EQ(e.flags & FI_SEND, FI_SEND);
  }
}

// What fi_pingpong does: registered buffers, inject, and a last send with
// FI_TRANSMIT_COMPLETE through fi_sendmsg.
TEST(FiRdm, RegisteredInjectAndTransmitCompleteSendMsg) {
  RdmPair p;
  ASSERT_NO_FATAL_FAILURE(p.Open(FI_MSG, FI_CQ_FORMAT_CONTEXT));
  std::vector<uint8_t> out(4096), in(4096);
  fid_mr *mr_out = nullptr, *mr_in = nullptr;
  ASSERT_EQ(fi_mr_reg(p.side[0].domain, out.data(), out.size(), FI_SEND, 0,
                      0xC0DE, 0, &mr_out, nullptr),
            0);
  ASSERT_EQ(fi_mr_reg(p.side[1].domain, in.data(), in.size(), FI_RECV, 0,
                      0xC0DE, 0, &mr_in, nullptr),
            0);
  Fill(out.data(), 100, 7);
  fi_cq_entry e{};
  fi_context2 rctx;
  ASSERT_EQ(fi_recv(p.side[1].ep, in.data(), in.size(), fi_mr_desc(mr_in),
                    FI_ADDR_UNSPEC, &rctx),
            0);
  ASSERT_EQ(fi_inject(p.side[0].ep, out.data(), 100, p.side[0].peer), 0);
  ASSERT_EQ(ReadOne(p.side[1].rx, &e, p.side[0].tx), 1);
  EXPECT_EQ(e.op_context, &rctx);
  EXPECT_EQ(FirstBadByte(in.data(), 100, 7), 100u);
  // Nothing completes for an inject.
  EXPECT_EQ(fi_cq_read(p.side[0].tx, &e, 1), -FI_EAGAIN);

  Fill(out.data(), 4096, 8);
  ASSERT_EQ(fi_recv(p.side[1].ep, in.data(), in.size(), fi_mr_desc(mr_in),
                    FI_ADDR_UNSPEC, &rctx),
            0);
  iovec iov{out.data(), 4096};
  void* desc = fi_mr_desc(mr_out);
  fi_context2 sctx;
  fi_msg msg{};
  msg.msg_iov = &iov;
  msg.desc = &desc;
  msg.iov_count = 1;
  msg.addr = p.side[0].peer;
  msg.context = &sctx;
  ASSERT_EQ(fi_sendmsg(p.side[0].ep, &msg, FI_TRANSMIT_COMPLETE), 0);
  ASSERT_EQ(ReadOne(p.side[0].tx, &e, p.side[1].rx), 1);
  EXPECT_EQ(e.op_context, &sctx);
  ASSERT_EQ(ReadOne(p.side[1].rx, &e, p.side[0].tx), 1);
  EXPECT_EQ(FirstBadByte(in.data(), 4096, 8), 4096u);
  // A descriptor of the other domain is refused, and nothing is sent.
  EXPECT_EQ(fi_send(p.side[0].ep, out.data(), 10, fi_mr_desc(mr_in),
                    p.side[0].peer, &sctx),
            -FI_EINVAL);
  EXPECT_EQ(fi_close(&mr_out->fid), 0);
  EXPECT_EQ(fi_close(&mr_in->fid), 0);
}

TEST(FiRdm, TaggedMatchingDataAndSource) {
  RdmPair p;
  ASSERT_NO_FATAL_FAILURE(
      p.Open(FI_TAGGED | FI_DIRECTED_RECV | FI_SOURCE, FI_CQ_FORMAT_TAGGED));
  const uint64_t bit63 = 1ULL << 63;
  char a[16] = "first", b[16] = "second", in1[16] = {}, in2[16] = {};
  fi_context2 c1, c2, s1, s2;
  // Posted in this order: the wildcard one (ignore low byte) takes tag 0x5,
  // the exact one tag bit63|0x7.
  ASSERT_EQ(fi_trecv(p.side[1].ep, in1, sizeof in1, nullptr, FI_ADDR_UNSPEC,
                     0x100, 0xFF, &c1),
            0);
  ASSERT_EQ(fi_trecv(p.side[1].ep, in2, sizeof in2, nullptr, p.side[1].peer,
                     bit63 | 7, 0, &c2),
            0);
  ASSERT_EQ(fi_tsenddata(p.side[0].ep, b, sizeof b, nullptr, 0xDA7A,
                         p.side[0].peer, bit63 | 7, &s2),
            0);
  ASSERT_EQ(
      fi_tsend(p.side[0].ep, a, sizeof a, nullptr, p.side[0].peer, 0x105, &s1),
      0);
  fi_cq_tagged_entry e[2]{};
  fi_addr_t src[2] = {};
  int got = 0;
  for (int i = 0; i < 1000000 && got < 2; ++i) {
    ssize_t rc = fi_cq_readfrom(p.side[1].rx, &e[got], 2 - got, &src[got]);
    if (rc > 0)
      got += static_cast<int>(rc);
    else
      ASSERT_EQ(rc, -FI_EAGAIN);
    fi_cq_read(p.side[0].tx, nullptr, 0);
  }
  ASSERT_EQ(got, 2);
  EXPECT_EQ(e[0].op_context, &c2);
  EXPECT_EQ(e[0].tag, bit63 | 7);
  EXPECT_EQ(e[0].data, 0xDA7Au);
  EXPECT_EQ(e[0].flags & FI_REMOTE_CQ_DATA, FI_REMOTE_CQ_DATA);
  EXPECT_EQ(src[0], p.side[1].peer);
  EXPECT_STREQ(in2, "second");
  EXPECT_EQ(e[1].op_context, &c1);
  EXPECT_EQ(e[1].tag, 0x105u);
  EXPECT_EQ(e[1].flags, FI_TAGGED | FI_RECV);
  EXPECT_STREQ(in1, "first");
  EXPECT_EQ(src[1], p.side[1].peer);
}

TEST(FiRdm, SendToSelfAndDataFormat) {
  RdmPair p;
  ASSERT_NO_FATAL_FAILURE(p.Open(FI_MSG, FI_CQ_FORMAT_DATA));
  char out[] = "to myself", in[32] = {};
  fi_context2 rctx;
  ASSERT_EQ(
      fi_recv(p.side[0].ep, in, sizeof in, nullptr, FI_ADDR_UNSPEC, &rctx), 0);
  ASSERT_EQ(fi_injectdata(p.side[0].ep, out, sizeof out, 42, p.side[0].self),
            0);
  fi_cq_data_entry e{};
  ASSERT_EQ(ReadOne(p.side[0].rx, &e, p.side[0].tx), 1);
  EXPECT_EQ(e.op_context, &rctx);
  EXPECT_EQ(e.len, sizeof out);
  EXPECT_EQ(e.data, 42u);
  EXPECT_EQ(e.buf, in);
  EXPECT_STREQ(in, out);
}

// fi_tagged(3): a peek that finds nothing completes with FI_ENOMSG; one that
// finds a message reports it; FI_CLAIM takes it with the peek's context and
// FI_DISCARD drops the next.
TEST(FiRdm, PeekClaimDiscard) {
  RdmPair p;
  ASSERT_NO_FATAL_FAILURE(p.Open(FI_TAGGED, FI_CQ_FORMAT_TAGGED));
  fi_context2 peek_ctx;
  fi_msg_tagged m{};
  m.addr = FI_ADDR_UNSPEC;
  m.tag = 9;
  m.context = &peek_ctx;
  ASSERT_EQ(fi_trecvmsg(p.side[1].ep, &m, FI_PEEK), 0);
  fi_cq_tagged_entry e{};
  ASSERT_EQ(ReadOne(p.side[1].rx, &e, p.side[0].tx), -FI_EAVAIL);
  fi_cq_err_entry err{};
  ASSERT_EQ(fi_cq_readerr(p.side[1].rx, &err, 0), 1);
  EXPECT_EQ(err.err, FI_ENOMSG);
  EXPECT_EQ(err.op_context, &peek_ctx);

  char one[] = "claimed", two[] = "discarded", in[32] = {};
  fi_context2 s1, s2;
  ASSERT_EQ(
      fi_tsend(p.side[0].ep, one, sizeof one, nullptr, p.side[0].peer, 9, &s1),
      0);
  ASSERT_EQ(
      fi_tsend(p.side[0].ep, two, sizeof two, nullptr, p.side[0].peer, 10, &s2),
      0);
  for (int i = 0; i < 2; ++i) {
    ASSERT_EQ(ReadOne(p.side[0].tx, &e, p.side[1].rx), 1);
  }
  ASSERT_EQ(fi_trecvmsg(p.side[1].ep, &m, FI_PEEK | FI_CLAIM), 0);
  ASSERT_EQ(ReadOne(p.side[1].rx, &e, p.side[0].tx), 1);
  EXPECT_EQ(e.op_context, &peek_ctx);
  EXPECT_EQ(e.tag, 9u);
  EXPECT_EQ(e.len, sizeof one);
  iovec iov{in, sizeof in};
  m.msg_iov = &iov;
  m.iov_count = 1;
  ASSERT_EQ(fi_trecvmsg(p.side[1].ep, &m, FI_CLAIM), 0);
  ASSERT_EQ(ReadOne(p.side[1].rx, &e, p.side[0].tx), 1);
  EXPECT_STREQ(in, "claimed");

  fi_context2 drop_ctx;
  fi_msg_tagged d{};
  d.addr = FI_ADDR_UNSPEC;
  d.tag = 10;
  d.context = &drop_ctx;
  ASSERT_EQ(fi_trecvmsg(p.side[1].ep, &d, FI_PEEK | FI_DISCARD), 0);
  ASSERT_EQ(ReadOne(p.side[1].rx, &e, p.side[0].tx), 1);
  EXPECT_EQ(e.op_context, &drop_ctx);
  d.context = &drop_ctx;
  ASSERT_EQ(fi_trecvmsg(p.side[1].ep, &d, FI_PEEK), 0);
  ASSERT_EQ(ReadOne(p.side[1].rx, &e, p.side[0].tx), -FI_EAVAIL);
  ASSERT_EQ(fi_cq_readerr(p.side[1].rx, &err, 0), 1);
  EXPECT_EQ(err.err, FI_ENOMSG);
}

// Peeks (FI_PEEK | FI_COMPLETION) with `m` until the message shows: a peek
// that finds nothing completes with FI_ENOMSG, and the next one is posted.
void PeekUntilFound(const RdmPair::Side& s, const fi_msg_tagged& m,
                    fi_cq_tagged_entry* e) {
  for (int tries = 0; tries < 1000; ++tries) {
    ASSERT_EQ(fi_trecvmsg(s.ep, &m, FI_PEEK | FI_COMPLETION), 0);
    const ssize_t rc = ReadOne(s.rx, e, s.tx);
    if (rc == 1) return;
    ASSERT_EQ(rc, -FI_EAVAIL);
    fi_cq_err_entry err{};
    ASSERT_EQ(fi_cq_readerr(s.rx, &err, 0), 1);
    ASSERT_EQ(err.err, FI_ENOMSG);
  }
  FAIL() << "the message never showed to a peek";
}

// What Open MPI's MPI_Iprobe + MPI_Recv do: a peek reports the message and
// leaves it for the receive that follows (here a zero-byte one, to self).
TEST(FiRdm, PeekLeavesTheMessageForAReceive) {
  RdmPair p;
  ASSERT_NO_FATAL_FAILURE(
      p.Open(FI_TAGGED | FI_DIRECTED_RECV, FI_CQ_FORMAT_TAGGED));
  for (size_t len : {size_t{0}, size_t{64}}) {
    char out[64] = "peeked then received", in[64] = {};
    ASSERT_EQ(fi_tinjectdata(p.side[0].ep, out, len, 5, p.side[0].self, 3), 0);
    fi_context2 peek_ctx;
    fi_msg_tagged m{};
    m.addr = FI_ADDR_UNSPEC;
    m.tag = 3;
    m.context = &peek_ctx;
    fi_cq_tagged_entry e{};
    ASSERT_NO_FATAL_FAILURE(PeekUntilFound(p.side[0], m, &e));
    EXPECT_EQ(e.op_context, &peek_ctx);
    EXPECT_EQ(e.len, len);
    EXPECT_EQ(e.data, 5u);
    fi_context2 rctx;
    ASSERT_EQ(
        fi_trecv(p.side[0].ep, in, len, nullptr, FI_ADDR_UNSPEC, 3, 0, &rctx),
        0);
    ASSERT_EQ(ReadOne(p.side[0].rx, &e, p.side[0].tx), 1) << len;
    EXPECT_EQ(e.op_context, &rctx);
    EXPECT_EQ(e.len, len);
    EXPECT_EQ(memcmp(in, out, len), 0);
  }
}

// Open MPI's MPI_Isend + MPI_Iprobe + MPI_Recv to itself, as it calls them:
// selective completion with FI_COMPLETION in both op_flags, fi_tsenddata,
// a peek for any tag, then fi_trecv (which must complete by default).
TEST(FiRdm, OpenMpiProbeThenReceive) {
  RdmPair p;
  ASSERT_NO_FATAL_FAILURE(p.Open(FI_TAGGED | FI_DIRECTED_RECV,
                                 FI_CQ_FORMAT_TAGGED, FI_WAIT_NONE, true));
  char out[8] = "x", in[8] = {};
  fi_context2 sctx, peek_ctx, rctx;
  ASSERT_EQ(
      fi_tsenddata(p.side[0].ep, out, 0, nullptr, 0, p.side[0].self, 0, &sctx),
      0);
  fi_msg_tagged m{};
  m.addr = FI_ADDR_UNSPEC;
  m.tag = 0;
  m.ignore = 0x17fffffffULL;
  m.context = &peek_ctx;
  fi_cq_tagged_entry e{};
  ASSERT_NO_FATAL_FAILURE(PeekUntilFound(p.side[0], m, &e));
  EXPECT_EQ(e.op_context, &peek_ctx);
  ASSERT_EQ(fi_trecv(p.side[0].ep, in, 0, nullptr, FI_ADDR_UNSPEC, 0,
                     0x100000000ULL, &rctx),
            0);
  ASSERT_EQ(ReadOne(p.side[0].rx, &e, p.side[0].tx), 1);
  EXPECT_EQ(e.op_context, &rctx);
  ASSERT_EQ(ReadOne(p.side[0].tx, &e, p.side[0].rx), 1);
  EXPECT_EQ(e.op_context, &sctx);
}

TEST(FiRdm, MultiRecvBufferTakesManyMessages) {
  RdmPair p;
  ASSERT_NO_FATAL_FAILURE(p.Open(FI_MSG | FI_MULTI_RECV, FI_CQ_FORMAT_DATA));
  size_t min = 64;
  ASSERT_EQ(fi_setopt(&p.side[1].ep->fid, FI_OPT_ENDPOINT,
                      FI_OPT_MIN_MULTI_RECV, &min, sizeof min),
            0);
  std::vector<uint8_t> pool(256);
  iovec iov{pool.data(), pool.size()};
  fi_context2 ctx;
  fi_msg m{};
  m.msg_iov = &iov;
  m.iov_count = 1;
  m.addr = FI_ADDR_UNSPEC;
  m.context = &ctx;
  ASSERT_EQ(fi_recvmsg(p.side[1].ep, &m, FI_MULTI_RECV), 0);
  std::vector<uint8_t> out(64);
  for (uint32_t i = 0; i < 3; ++i) {
    Fill(out.data(), out.size(), i);
    ASSERT_EQ(fi_inject(p.side[0].ep, out.data(), out.size(), p.side[0].peer),
              0);
  }
  bool released = false;
  for (uint32_t i = 0; i < 3; ++i) {
    fi_cq_data_entry e{};
    ASSERT_EQ(ReadOne(p.side[1].rx, &e, p.side[0].tx), 1);
    EXPECT_EQ(e.op_context, &ctx);
    EXPECT_EQ(e.len, 64u);
    EXPECT_EQ(e.buf, pool.data() + 64 * i);
    EXPECT_EQ(FirstBadByte(e.buf, 64, i), 64u);
    released |= (e.flags & FI_MULTI_RECV) != 0;
  }
  // 64 bytes left is not below the minimum: one more message fits, after
  // which the buffer is released with FI_MULTI_RECV.
  EXPECT_FALSE(released);
  ASSERT_EQ(fi_inject(p.side[0].ep, out.data(), out.size(), p.side[0].peer), 0);
  fi_cq_data_entry e{};
  ASSERT_EQ(ReadOne(p.side[1].rx, &e, p.side[0].tx), 1);
  EXPECT_EQ(e.flags & FI_MULTI_RECV, FI_MULTI_RECV);
}

TEST(FiRdm, TruncationAndCancelAreErrorEntries) {
  RdmPair p;
  ASSERT_NO_FATAL_FAILURE(p.Open(FI_MSG, FI_CQ_FORMAT_MSG));
  char big[100] = {}, small[10] = {};
  fi_context2 rctx, sctx;
  ASSERT_EQ(fi_recv(p.side[1].ep, small, sizeof small, nullptr, FI_ADDR_UNSPEC,
                    &rctx),
            0);
  ASSERT_EQ(
      fi_send(p.side[0].ep, big, sizeof big, nullptr, p.side[0].peer, &sctx),
      0);
  fi_cq_msg_entry e{};
  fi_cq_err_entry err{};
  ASSERT_NO_FATAL_FAILURE(TakeErrorEntry(p.side[1].rx, p.side[0].tx, &err));
  EXPECT_EQ(err.err, FI_ETRUNC);
  EXPECT_EQ(err.op_context, &rctx);
  EXPECT_EQ(err.olen, sizeof big - sizeof small);
  EXPECT_NE(err.prov_errno, 0);
  char text[256];
  const char* s = fi_cq_strerror(p.side[1].rx, err.prov_errno, err.err_data,
                                 text, sizeof text);
  ASSERT_NE(s, nullptr);
  EXPECT_NE(std::string(s).find("trunc"), std::string::npos) << s;
  EXPECT_STRNE(fi_strerror(FI_ETRUNC), "");

  fi_context2 cctx;
  ASSERT_EQ(fi_recv(p.side[1].ep, small, sizeof small, nullptr, FI_ADDR_UNSPEC,
                    &cctx),
            0);
  ASSERT_EQ(fi_cancel(&p.side[1].ep->fid, &cctx), 0);
  ASSERT_EQ(ReadOne(p.side[1].rx, &e, p.side[0].tx), -FI_EAVAIL);
  ASSERT_EQ(fi_cq_readerr(p.side[1].rx, &err, 0), 1);
  EXPECT_EQ(err.err, FI_ECANCELED);
  EXPECT_EQ(err.op_context, &cctx);
}

// A CQ with a wait fd: fi_control(FI_GETWAIT) gives it, fi_trywait says
// when to sleep on it, fi_cq_sread blocks (in virtual time) until a message.
// Progress is manual: the first message, which sets up the RDM connection,
// needs both sides read, so one goes before the blocking part.
TEST(FiRdm, WaitFdTrywaitAndSread) {
  RdmPair p;
  ASSERT_NO_FATAL_FAILURE(p.Open(FI_MSG, FI_CQ_FORMAT_CONTEXT, FI_WAIT_FD));
  {
    char warm[4] = {}, warm_in[4];
    fi_context2 c1, c2;
    ASSERT_EQ(fi_recv(p.side[1].ep, warm_in, 4, nullptr, FI_ADDR_UNSPEC, &c1),
              0);
    ASSERT_EQ(fi_send(p.side[0].ep, warm, 4, nullptr, p.side[0].peer, &c2), 0);
    fi_cq_entry e{};
    ASSERT_EQ(ReadOne(p.side[1].rx, &e, p.side[0].tx), 1);
    ASSERT_EQ(ReadOne(p.side[0].tx, &e, p.side[1].rx), 1);
  }
  int fd = -1;
  ASSERT_EQ(fi_control(&p.side[1].rx->fid, FI_GETWAIT, &fd), 0);
  ASSERT_GE(fd, 0);
  fid* fids[] = {&p.side[1].rx->fid};
  EXPECT_EQ(fi_trywait(p.fabric, fids, 1), 0);  // idle: safe to sleep
  fi_cq_entry e{};
  EXPECT_EQ(fi_cq_sread(p.side[1].rx, &e, 1, nullptr, 5), -FI_EAGAIN);

  char out[] = "wake", in[8] = {};
  fi_context2 rctx, sctx;
  ASSERT_EQ(
      fi_recv(p.side[1].ep, in, sizeof in, nullptr, FI_ADDR_UNSPEC, &rctx), 0);
  ASSERT_EQ(
      fi_send(p.side[0].ep, out, sizeof out, nullptr, p.side[0].peer, &sctx),
      0);
  if (OnSimulator()) {
    // Traffic pending in the simulated fabric: the caller must read before
    // sleeping, and the descriptor says so. (On a device the message may
    // not have landed yet, so both answers are right there.)
    EXPECT_EQ(fi_trywait(p.fabric, fids, 1), -FI_EAGAIN);
    pollfd pfd{fd, POLLIN, 0};
    EXPECT_EQ(poll(&pfd, 1, 0), 1);
  }
  ASSERT_EQ(fi_cq_sread(p.side[1].rx, &e, 1, nullptr, 1000), 1);
  EXPECT_EQ(e.op_context, &rctx);
  EXPECT_STREQ(in, "wake");
  fid* eq_like[] = {&p.side[0].av->fid};
  EXPECT_EQ(fi_trywait(p.fabric, eq_like, 1), -FI_ENOSYS);
}

// FI_BUFFERED_RECV (fi_msg(3)): a message arrives without a posted receive;
// its entry's op_context is an fi_recv_context naming the application's
// endpoint, which FI_DISCARD (or FI_CLAIM) then takes.
TEST(FiRdm, BufferedReceiveNamesTheApplicationsEndpoint) {
  RdmPair p;
  ASSERT_NO_FATAL_FAILURE(
      p.Open(FI_MSG, FI_CQ_FORMAT_MSG, FI_WAIT_NONE, false, FI_BUFFERED_RECV));
  const std::vector<uint8_t> out = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  fi_context2 sctx;
  ASSERT_EQ(fi_send(p.side[0].ep, out.data(), out.size(), nullptr,
                    p.side[0].peer, &sctx),
            0);
  fi_cq_msg_entry e{};
  ASSERT_EQ(ReadOne(p.side[1].rx, &e, p.side[0].tx), 1);
  EXPECT_EQ(e.flags & (FI_RECV | FI_MSG), FI_RECV | FI_MSG);
  EXPECT_EQ(e.len, out.size());
  auto* rc = static_cast<fi_recv_context*>(e.op_context);
  ASSERT_NE(rc, nullptr);
  EXPECT_EQ(rc->ep, p.side[1].ep);
  EXPECT_EQ(rc->context, nullptr);
  fi_msg msg{};
  msg.context = rc;
  ASSERT_EQ(fi_recvmsg(p.side[1].ep, &msg, FI_DISCARD), 0);
  // Decided once: the same context again is refused.
  EXPECT_EQ(fi_recvmsg(p.side[1].ep, &msg, FI_DISCARD), -FI_EINVAL);
  ASSERT_EQ(ReadOne(p.side[0].tx, &e, p.side[1].rx), 1);
  EXPECT_EQ(e.op_context, &sctx);
}

// fi_av(3): an AV's count is how many addresses the application expects,
// not a limit (Open MPI opens one for its local ranks and inserts them all).
TEST(FiRdm, AvCountIsAHintNotALimit) {
  RdmPair p;
  ASSERT_NO_FATAL_FAILURE(p.Open(FI_MSG, FI_CQ_FORMAT_MSG));
  fi_av_attr attr{};
  attr.type = FI_AV_TABLE;
  attr.count = 1;
  fid_av* av = nullptr;
  ASSERT_EQ(fi_av_open(p.side[0].domain, &attr, &av, nullptr), 0);
  std::vector<uint8_t> names;
  for (auto& side : p.side) {
    size_t len = 64;
    uint8_t name[64];
    ASSERT_EQ(fi_getname(&side.ep->fid, name, &len), 0);
    names.insert(names.end(), name, name + len);
  }
  fi_addr_t addr[2] = {FI_ADDR_NOTAVAIL, FI_ADDR_NOTAVAIL};
  EXPECT_EQ(fi_av_insert(av, names.data(), 2, addr, 0, nullptr), 2);
  EXPECT_NE(addr[0], FI_ADDR_NOTAVAIL);
  EXPECT_NE(addr[1], FI_ADDR_NOTAVAIL);
  EXPECT_EQ(fi_close(&av->fid), 0);
}

// FI_SOFTFAB_SIM_SCENARIO: a scenario file's topology and faults make the
// simulated fabric (simulator only: a verbs fabric has real faults).
class ScenarioEnv {
 public:
  explicit ScenarioEnv(const char* path, const char* drop = nullptr) {
    setenv("FI_SOFTFAB_SIM_SCENARIO", path, 1);
    if (drop != nullptr) setenv("FI_SOFTFAB_SIM_DROP", drop, 1);
  }
  ~ScenarioEnv() {
    unsetenv("FI_SOFTFAB_SIM_SCENARIO");
    unsetenv("FI_SOFTFAB_SIM_DROP");
  }
};

TEST(FiScenario, LossyFabricDeliversEveryMessageOnce) {
  if (!OnSimulator()) GTEST_SKIP() << "simulator case";
  ScenarioEnv scenario("examples/scenarios/programs/lossy.yaml");
  RdmPair p;
  ASSERT_NO_FATAL_FAILURE(p.Open(FI_TAGGED, FI_CQ_FORMAT_TAGGED));
  constexpr int kMessages = 64;
  constexpr size_t kLen = 3000;
  std::vector<std::vector<uint8_t>> in(kMessages, std::vector<uint8_t>(kLen));
  std::vector<uint8_t> out(kLen);
  std::vector<fi_context2> rctx(kMessages), sctx(kMessages);
  for (int i = 0; i < kMessages; ++i) {
    ASSERT_EQ(fi_trecv(p.side[1].ep, in[i].data(), kLen, nullptr,
                       FI_ADDR_UNSPEC, i, 0, &rctx[i]),
              0);
  }
  std::vector<int> arrived(kMessages, 0);
  int sent = 0, received = 0;
  for (int i = 0; i < kMessages; ++i) {
    Fill(out.data(), kLen, static_cast<uint32_t>(i));
    ASSERT_EQ(fi_tsend(p.side[0].ep, out.data(), kLen, nullptr, p.side[0].peer,
                       i, &sctx[i]),
              0);
    fi_cq_tagged_entry e{};
    ASSERT_EQ(ReadOne(p.side[0].tx, &e, p.side[1].rx), 1) << i;
    ++sent;
    while (fi_cq_read(p.side[1].rx, &e, 1) == 1) {
      ++arrived[e.tag];
      ++received;
    }
  }
  fi_cq_tagged_entry e{};
  while (received < kMessages) {
    ASSERT_EQ(ReadOne(p.side[1].rx, &e, p.side[0].tx), 1);
    ++arrived[e.tag];
    ++received;
  }
  EXPECT_EQ(sent, kMessages);
  for (int i = 0; i < kMessages; ++i) {
    EXPECT_EQ(arrived[i], 1) << i;
    EXPECT_EQ(FirstBadByte(in[i].data(), kLen, static_cast<uint32_t>(i)), kLen)
        << i;
  }
  // Nothing more comes (no duplicate reaches the application).
  EXPECT_EQ(ReadOne(p.side[1].rx, &e, p.side[0].tx, 1000), -FI_EAGAIN);
}

TEST(FiScenario, FaultsOfTheFileApply) {
  if (!OnSimulator()) GTEST_SKIP() << "simulator case";
  // Every packet lost: the send ends in an error entry once the retries
  // are spent (in virtual time).
  ScenarioEnv scenario("examples/scenarios/programs/black_hole.yaml");
  RdmPair p;
  ASSERT_NO_FATAL_FAILURE(p.Open(FI_MSG, FI_CQ_FORMAT_MSG));
  char buf[64] = {};
  fi_context2 sctx;
  ASSERT_EQ(
      fi_send(p.side[0].ep, buf, sizeof buf, nullptr, p.side[0].peer, &sctx),
      0);
  fi_cq_err_entry err{};
  ASSERT_NO_FATAL_FAILURE(TakeErrorEntry(p.side[0].tx, p.side[1].rx, &err));
  EXPECT_EQ(err.op_context, &sctx);
  EXPECT_NE(err.err, 0);
}

TEST(FiScenario, APortDownIsAnErrorEventOnTheEndpointsEq) {
  if (!OnSimulator()) GTEST_SKIP() << "simulator case";
  // Node 0's port goes down 500 ms in (the device's PORT_ERR event), well
  // after the connection is made.
  ScenarioEnv scenario("examples/scenarios/programs/port_down.yaml");
  constexpr int kProvPortDown = 0x1000 + 14;  // SF_PROV_PORT_DOWN
  RdmPair p;
  p.eq_on_0 = true;
  ASSERT_NO_FATAL_FAILURE(p.Open(FI_MSG, FI_CQ_FORMAT_MSG));
  // Connected first.
  char buf[64] = {}, in[64];
  fi_context2 rctx, sctx;
  ASSERT_EQ(
      fi_recv(p.side[1].ep, in, sizeof in, nullptr, p.side[1].peer, &rctx), 0);
  ASSERT_EQ(
      fi_send(p.side[0].ep, buf, sizeof buf, nullptr, p.side[0].peer, &sctx),
      0);
  // Read with timed waits of 1 ms: a plain read of an empty CQ runs the
  // simulated fabric to its next event however far, here the fault.
  fi_cq_msg_entry e{};
  bool received = false, sent = false;
  for (int i = 0; i < 1000 && !(received && sent); ++i) {
    for (auto [cq, done] :
         {std::pair{p.side[1].rx, &received}, std::pair{p.side[0].tx, &sent}}) {
      if (*done) continue;
      const ssize_t rc = fi_cq_sread(cq, &e, 1, nullptr, 1);
      ASSERT_TRUE(rc == 1 || rc == -FI_EAGAIN) << rc;
      *done = rc == 1;
    }
  }
  ASSERT_TRUE(received && sent);
  // The event comes when the port goes down.
  uint32_t event = 0;
  uint8_t entry[sizeof(fi_eq_cm_entry) + 64];
  ASSERT_EQ(fi_eq_sread(p.eq, &event, entry, sizeof entry, 1000, 0),
            -FI_EAVAIL);
  fi_eq_err_entry err{};
  ASSERT_EQ(fi_eq_readerr(p.eq, &err, 0), static_cast<ssize_t>(sizeof err));
  EXPECT_EQ(err.fid, &p.side[0].ep->fid);
  EXPECT_EQ(err.err, FI_ENETDOWN);
  EXPECT_EQ(err.prov_errno, kProvPortDown);
  char text[256];
  const std::string sentence =
      fi_eq_strerror(p.eq, err.prov_errno, nullptr, text, sizeof text);
  EXPECT_NE(sentence.find("port"), std::string::npos) << sentence;
  // A send now is taken (the port may come back), and fails naming the
  // port once its retries run out.
  ASSERT_EQ(
      fi_send(p.side[0].ep, buf, sizeof buf, nullptr, p.side[0].peer, &sctx),
      0);
  fi_cq_err_entry cq_err{};
  ASSERT_NO_FATAL_FAILURE(TakeErrorEntry(p.side[0].tx, p.side[1].rx, &cq_err));
  EXPECT_EQ(cq_err.op_context, &sctx);
  EXPECT_EQ(cq_err.err, FI_EIO);
  EXPECT_EQ(cq_err.prov_errno, kProvPortDown);
}

TEST(FiScenario, FilesThatCannotMakeAFabricAreRefused) {
  if (!OnSimulator()) GTEST_SKIP() << "simulator case";
  struct Case {
    const char* path;
    const char* drop;
    const char* why;
  } cases[] = {
      {"examples/scenarios/lossy_link_rc.yaml", nullptr,
       "a study's scenario: its workload section is refused"},
      {"examples/scenarios/programs/lossy.yaml", "0.1",
       "the scenario and FI_SOFTFAB_SIM_DROP both describe the fabric"},
      {"/nonexistent/scenario.yaml", nullptr, "no such file"},
      {"/dev/zero", nullptr, "not a regular file"},
  };
  for (const Case& c : cases) {
    ScenarioEnv scenario(c.path, c.drop);
    fi_info* h = SimHints(FI_EP_RDM, FI_MSG);
    fi_info* info = nullptr;
    ASSERT_EQ(fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, h, &info), 0);
    fi_freeinfo(h);
    fid_fabric* fabric = nullptr;
    EXPECT_EQ(fi_fabric(info->fabric_attr, &fabric, nullptr), -FI_EINVAL)
        << c.why;
    EXPECT_EQ(fabric, nullptr) << c.why;
    fi_freeinfo(info);
  }
}

TEST(FiRdm, UnsupportedCallsSayENOSYS) {
  RdmPair p;
  ASSERT_NO_FATAL_FAILURE(p.Open(FI_MSG, FI_CQ_FORMAT_CONTEXT));
  char buf[8];
  EXPECT_EQ(fi_read(p.side[0].ep, buf, sizeof buf, nullptr, p.side[0].peer, 0,
                    0, nullptr),
            -FI_ENOSYS);
  EXPECT_EQ(fi_write(p.side[0].ep, buf, sizeof buf, nullptr, p.side[0].peer, 0,
                     0, nullptr),
            -FI_ENOSYS);
  fid_cntr* cntr = nullptr;
  fi_cntr_attr cattr{};
  EXPECT_EQ(fi_cntr_open(p.side[0].domain, &cattr, &cntr, nullptr), -FI_ENOSYS);
  fid_ep* sep = nullptr;
  EXPECT_EQ(fi_scalable_ep(p.side[0].domain, p.info, &sep, nullptr),
            -FI_ENOSYS);
  EXPECT_EQ(fi_cq_signal(p.side[0].rx), -FI_ENOSYS);
  int opt = 0;
  size_t optlen = sizeof opt;
  EXPECT_EQ(fi_getopt(&p.side[0].ep->fid, FI_OPT_ENDPOINT, 99, &opt, &optlen),
            -FI_ENOPROTOOPT);
  // A domain with objects open refuses to close.
  EXPECT_EQ(fi_close(&p.side[0].domain->fid), -FI_EBUSY);
}

}  // namespace
}  // namespace softfab::fi_test
