// softfab_pingpong: a ping-pong over the sf_* API, like libfabric's
// fi_pingpong, that checks every byte it receives.
//
// On the verbs backend it runs as two processes that exchange endpoint names
// over a TCP socket (the server listens on --oob-port, the client connects to
// it), then bounce messages of each size between them:
//   softfab_pingpong --backend verbs                 # server
//   softfab_pingpong --backend verbs 127.0.0.1       # client
// On the simulator both sides run in this one process on two simulated nodes.
//
// Options: --ep rdm|msg, --tagged, --sizes a,b,c (default 8 B to 16 MiB),
// --iters N (per size; large sizes run fewer, at least 2), --device NAME,
// --port N, --gid-index N, --oob-port P, --timeout-ms T (per wait), --busy
// (poll the CQ with sf_cq_read, as perftest does, instead of sleeping in
// sf_cq_sread on the completion channel), --stream N [--window W] (two
// processes: N messages per size streamed with W in flight, like ib_send_bw;
// prints messages per second and MB/s), --no-desc (pass no memory
// descriptors, so softfab registers the buffers itself: what the MR cache,
// on by default on verbs, is for; SOFTFAB_MR_CACHE=0 turns it off),
// --inject (a message smaller than the endpoint's inject_size goes by
// sf_inject / sf_tinject and no send completion is awaited, as fi_pingpong
// does; streaming, as many are in flight as softfab takes before it says
// -SF_EAGAIN).
// Exit status 0 when every message arrived with its bytes, 1 otherwise, 2 for
// bad usage.
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

#include "api/softfab/fabric.h"
#include "examples/name_exchange.h"

namespace {

using softfab::examples::OobSocket;

struct Options {
  sf_backend backend = SF_BACKEND_SIM;
  sf_ep_type ep_type = SF_EP_RDM;
  bool tagged = false;
  std::vector<size_t> sizes;
  int iters = 100;
  std::string device;
  int port = 0;
  int gid_index = -1;
  int oob_port = 47592;
  int timeout_ms = 10000;
  std::string server;    // the client's peer; empty: this is the server.
  bool busy = false;     // poll with sf_cq_read instead of sleeping in sread
  int stream = 0;        // > 0: stream this many messages per size (bandwidth)
  int window = 64;       // sends in flight when streaming
  bool no_desc = false;  // pass no descriptors: softfab registers (MR cache)
  bool inject = false;   // small messages by sf_inject, no send completion
};

// One end of the ping-pong: its objects and its registered buffers.
struct Side {
  const char* role = "";
  int id = 0;  // 0 server, 1 client: part of the byte pattern.
  sf_domain* domain = nullptr;
  sf_cq* cq = nullptr;
  sf_av* av = nullptr;
  sf_eq* eq = nullptr;
  sf_pep* pep = nullptr;
  sf_ep* ep = nullptr;
  sf_addr_t peer = SF_ADDR_UNSPEC;
  std::vector<uint8_t> tx, rx;
  sf_mr* tx_mr = nullptr;
  sf_mr* rx_mr = nullptr;
  Side* other = nullptr;   // one-process runs: the side a wait also drives.
  size_t inject_size = 0;  // sf_ep_query's, once enabled
  uint64_t injected = 0;   // messages sf_inject took (--inject)
};

int64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

[[noreturn]] void Die(const char* role, const char* what, long rc) {
  std::fprintf(stderr, "softfab_pingpong: %s: %s: %s (%s)\n", role, what,
               sf_strerror(static_cast<int>(rc)), sf_last_error());
  std::exit(1);
}

void Check(const Side& s, const char* what, long rc) {
  if (rc < 0) Die(s.role, what, rc);
}

// Message `seq` of `size` bytes sent by side `from` is a pattern of 8-byte
// words, each a mix of the four numbers (the last one cut short): a word at a
// time, so that filling and checking an 8-byte message costs a few
// instructions, not a few per byte, in a ping-pong whose every instruction
// counts (bench/instructions_per_round_trip_vm.sh).
uint64_t PatternWord(size_t size, int seq, int from, size_t word) {
  uint64_t x = (size * 131 + static_cast<uint64_t>(seq) * 7919 +
                static_cast<uint64_t>(from) * 104729 + word) *
               0x9e3779b97f4a7c15ull;
  return x ^ (x >> 29);
}

void FillPattern(uint8_t* p, size_t size, int seq, int from) {
  for (size_t off = 0, word = 0; off < size; off += 8, ++word) {
    const uint64_t w = PatternWord(size, seq, from, word);
    std::memcpy(p + off, &w, std::min<size_t>(8, size - off));
  }
}

// The first byte of p that differs from the pattern, or `size`.
size_t PatternDiffers(const uint8_t* p, size_t size, int seq, int from) {
  for (size_t off = 0, word = 0; off < size; off += 8, ++word) {
    const uint64_t w = PatternWord(size, seq, from, word);
    const size_t n = std::min<size_t>(8, size - off);
    if (std::memcmp(p + off, &w, n) == 0) continue;
    for (size_t i = 0; i < n; ++i) {
      if (p[off + i] != reinterpret_cast<const uint8_t*>(&w)[i]) return off + i;
    }
  }
  return size;
}

// An error entry is next on s.cq: ends the program with its text.
[[noreturn]] void DieOfErrorEntry(Side& s) {
  sf_cq_err_entry err{};
  Check(s, "sf_cq_readerr", sf_cq_readerr(s.cq, &err, 0));
  std::fprintf(stderr,
               "softfab_pingpong: %s: error completion: %s (err %d, "
               "prov_errno %d, len %zu, olen %zu)\n",
               s.role, sf_strerror(err.err), err.err, err.prov_errno, err.len,
               err.olen);
  std::exit(1);
}

// Reads one completion entry from s.cq within timeout_ms (exits otherwise),
// driving the other side's progress in a one-process run. An error entry
// ends the program with its text.
void WaitOne(Side& s, int timeout_ms, sf_cq_tagged_entry* entry, bool busy) {
  // The clock is first read when the wait has lasted a while (1,024 busy
  // polls, or one sleep): a short wait costs no clock read (a system call in
  // a VM), and the timeout counts from there.
  int64_t deadline = 0;
  for (uint32_t spins = 1;; ++spins) {
    ssize_t n;
    if (s.other == nullptr) {
      n = busy ? sf_cq_read(s.cq, entry, 1)
               : sf_cq_sread(s.cq, entry, 1, nullptr, timeout_ms);
    } else {
      n = sf_cq_read(s.cq, entry, 1);
      if (n == -SF_EAGAIN) (void)sf_cq_read(s.other->cq, nullptr, 0);
    }
    if (n == 1) return;
    if (n == -SF_EAVAIL) DieOfErrorEntry(s);
    if (n != -SF_EAGAIN && n != -SF_ETIMEDOUT) Die(s.role, "sf_cq_read", n);
    // A busy poll reads the clock now and then only: it can cost a system
    // call (a VM's emulated timer), which would dominate a short wait.
    if (busy && spins % 1024 != 0) continue;
    if (deadline == 0) {
      deadline = NowNs() + int64_t{timeout_ms} * 1000000;
    } else if (NowNs() > deadline) {
      std::fprintf(stderr, "softfab_pingpong: %s: no completion in %d ms\n",
                   s.role, timeout_ms);
      std::exit(1);
    }
  }
}

// Waits for one event of type `want` on s.eq, driving the other side in a
// one-process run; returns the entry (with its info for SF_CONNREQ).
sf_eq_cm_entry WaitEvent(Side& s, uint32_t want, int timeout_ms) {
  alignas(sf_eq_cm_entry) uint8_t buf[sizeof(sf_eq_cm_entry) + 64] = {};
  const int64_t deadline = NowNs() + int64_t{timeout_ms} * 1000000;
  while (true) {
    uint32_t event = 0;
    ssize_t n;
    if (s.other == nullptr) {
      n = sf_eq_sread(s.eq, &event, buf, sizeof buf, timeout_ms, 0);
    } else {
      n = sf_eq_read(s.eq, &event, buf, sizeof buf, 0);
      if (n == -SF_EAGAIN) {
        (void)sf_cq_read(s.cq, nullptr, 0);
        (void)sf_cq_read(s.other->cq, nullptr, 0);
      }
    }
    if (n > 0) {
      if (event != want) {
        std::fprintf(stderr, "softfab_pingpong: %s: event %u, expected %u\n",
                     s.role, event, want);
        std::exit(1);
      }
      sf_eq_cm_entry entry;
      std::memcpy(&entry, buf, sizeof entry);
      return entry;
    }
    if (n == -SF_EAVAIL) {
      sf_eq_err_entry err{};
      (void)sf_eq_readerr(s.eq, &err, 0);
      std::fprintf(stderr, "softfab_pingpong: %s: connection failed: %s\n",
                   s.role, sf_strerror(err.err));
      std::exit(1);
    }
    if (n != -SF_EAGAIN && n != -SF_ETIMEDOUT) Die(s.role, "sf_eq_read", n);
    if (NowNs() > deadline) {
      std::fprintf(stderr, "softfab_pingpong: %s: no event in %d ms\n", s.role,
                   timeout_ms);
      std::exit(1);
    }
  }
}

void OpenSide(sf_fabric* fabric, int node, size_t max_size, Side* s) {
  Check(*s, "sf_domain_open", sf_domain_open(fabric, node, &s->domain, s));
  sf_cq_attr ca{};
  ca.size = 1024;
  ca.format = SF_CQ_FORMAT_TAGGED;
  Check(*s, "sf_cq_open", sf_cq_open(s->domain, &ca, &s->cq, s));
  sf_eq_attr ea{};
  Check(*s, "sf_eq_open",
        sf_eq_open(reinterpret_cast<sf_fabric*>(fabric), &ea, &s->eq, s));
  s->tx.assign(max_size, 0);
  s->rx.assign(max_size + 1, 0);  // one guard byte past the largest message
  Check(*s, "sf_mr_reg(tx)",
        sf_mr_reg(s->domain, s->tx.data(), s->tx.size(), SF_SEND | SF_READ, 0,
                  0, 0, &s->tx_mr, nullptr));
  Check(*s, "sf_mr_reg(rx)",
        sf_mr_reg(s->domain, s->rx.data(), s->rx.size(), SF_RECV | SF_WRITE, 0,
                  0, 0, &s->rx_mr, nullptr));
}

void MakeEndpoint(const Options& o, Side* s, sf_info* info) {
  sf_ep_attr attr{};
  attr.type = o.ep_type;
  attr.caps = o.tagged ? SF_TAGGED : SF_MSG;
  attr.info = info;
  Check(*s, "sf_endpoint", sf_endpoint(s->domain, &attr, &s->ep, s));
  Check(*s, "sf_ep_bind(cq)",
        sf_ep_bind(s->ep, &s->cq->fid, SF_TRANSMIT | SF_RECV));
  if (o.ep_type == SF_EP_RDM) {
    sf_av_attr aa{};
    Check(*s, "sf_av_open", sf_av_open(s->domain, &aa, &s->av, s));
    Check(*s, "sf_ep_bind(av)", sf_ep_bind(s->ep, &s->av->fid, 0));
  } else {
    Check(*s, "sf_ep_bind(eq)", sf_ep_bind(s->ep, &s->eq->fid, 0));
  }
  Check(*s, "sf_enable", sf_enable(s->ep));
  sf_ep_attr q{};
  Check(*s, "sf_ep_query", sf_ep_query(s->ep, &q));
  s->inject_size = q.inject_size;
}

// Whether a message of `size` bytes goes by sf_inject (--inject): below the
// inject size, as fi_pingpong decides. It then writes no completion entry.
bool Injects(const Options& o, const Side& s, size_t size) {
  return o.inject && size < s.inject_size;
}

std::vector<uint8_t> NameOf(sf_fid* fid, const Side& s) {
  std::vector<uint8_t> name(SF_NAME_BYTES);
  size_t len = name.size();
  Check(s, "sf_getname", sf_getname(fid, name.data(), &len));
  return name;
}

void InsertPeer(Side* s, const std::vector<uint8_t>& name) {
  const int n = sf_av_insert(s->av, name.data(), 1, &s->peer, 0, nullptr);
  if (n != 1) Die(s->role, "sf_av_insert", n < 0 ? n : -SF_EINVAL);
}

ssize_t PostRecv(const Options& o, Side& s, size_t size) {
  void* desc = o.no_desc ? nullptr : sf_mr_desc(s.rx_mr);
  return o.tagged
             ? sf_trecv(s.ep, s.rx.data(), size, desc, s.peer, 0x5F, 0, nullptr)
             : sf_recv(s.ep, s.rx.data(), size, desc, s.peer, nullptr);
}

// One post of s.tx's first `size` bytes: injected (Injects) or sent.
ssize_t PostSend(const Options& o, Side& s, size_t size) {
  if (Injects(o, s, size)) {
    const ssize_t r = o.tagged
                          ? sf_tinject(s.ep, s.tx.data(), size, s.peer, 0x5F)
                          : sf_inject(s.ep, s.tx.data(), size, s.peer);
    if (r == 0) ++s.injected;
    return r;
  }
  void* desc = o.no_desc ? nullptr : sf_mr_desc(s.tx_mr);
  return o.tagged
             ? sf_tsend(s.ep, s.tx.data(), size, desc, s.peer, 0x5F, nullptr)
             : sf_send(s.ep, s.tx.data(), size, desc, s.peer, nullptr);
}

void Send(const Options& o, Side& s, size_t size, int seq) {
  FillPattern(s.tx.data(), size, seq, s.id);
  while (true) {
    const ssize_t r = PostSend(o, s, size);
    if (r == 0) return;
    if (r != -SF_EAGAIN) Die(s.role, "send", r);
    (void)sf_cq_read(s.cq, nullptr, 0);
    if (s.other) (void)sf_cq_read(s.other->cq, nullptr, 0);
  }
}

// Waits for the posted receive and the send, in either order, and checks the
// received bytes and the guard byte after them.
bool Complete(const Options& o, Side& s, size_t size, int seq, int from) {
  bool got_recv = false, got_send = Injects(o, s, size);
  while (!got_recv || !got_send) {
    sf_cq_tagged_entry e{};
    WaitOne(s, o.timeout_ms, &e, o.busy);
    if (e.flags & SF_RECV) {
      got_recv = true;
      if (e.len != size) {
        std::fprintf(stderr, "%s: size %zu: received %zu bytes\n", s.role, size,
                     e.len);
        return false;
      }
    } else {
      got_send = true;
    }
  }
  if (const size_t i = PatternDiffers(s.rx.data(), size, seq, from);
      i != size) {
    std::fprintf(stderr, "%s: size %zu message %d: byte %zu differs\n", s.role,
                 size, seq, i);
    return false;
  }
  if (s.rx[size] != 0xA5) {
    std::fprintf(stderr, "%s: size %zu: wrote past the message\n", s.role,
                 size);
    return false;
  }
  return true;
}

int ItersFor(const Options& o, size_t size) {
  const size_t budget = size_t{32} << 20;  // bytes per direction per size
  const size_t most = std::max<size_t>(2, budget / std::max<size_t>(size, 1));
  return static_cast<int>(std::min<size_t>(o.iters, most));
}

// One size, from one side's point of view: the client sends first.
bool RunSize(const Options& o, Side& s, size_t size) {
  const bool client = s.id == 1;
  for (int seq = 0; seq < ItersFor(o, size); ++seq) {
    s.rx[size] = 0xA5;
    Check(s, "post receive", PostRecv(o, s, size + 1));
    if (client) Send(o, s, size, seq);
    if (!client) {
      // The server answers once the ping is in: its send completes later.
      sf_cq_tagged_entry e{};
      WaitOne(s, o.timeout_ms, &e, o.busy);
      if (!(e.flags & SF_RECV) || e.len != size) return false;
      if (const size_t i = PatternDiffers(s.rx.data(), size, seq, 1);
          i != size) {
        std::fprintf(stderr, "server: size %zu message %d: byte %zu\n", size,
                     seq, i);
        return false;
      }
      Send(o, s, size, seq);
      if (Injects(o, s, size)) continue;
      WaitOne(s, o.timeout_ms, &e, o.busy);  // the pong's send completion
      if (e.flags & SF_RECV) return false;
      continue;
    }
    if (!Complete(o, s, size, seq, 0)) return false;
  }
  return true;
}

// Streaming (two processes), like ib_send_bw: the client keeps `window`
// sends in flight (injected ones: as many as softfab takes) until o.stream
// messages are out; the server keeps `window` receives posted and, when all
// arrived, answers with one byte. The client times first send to that
// answer. The last message's bytes are checked.
bool RunStream(const Options& o, Side& s, size_t size) {
  const int total = o.stream;
  sf_cq_tagged_entry e{};
  if (s.id == 0) {
    int posted = 0, arrived = 0;
    for (; posted < std::min(total, o.window); ++posted) {
      Check(s, "post receive", PostRecv(o, s, size));
    }
    while (arrived < total) {
      WaitOne(s, o.timeout_ms, &e, o.busy);
      if (!(e.flags & SF_RECV) || e.len != size) return false;
      ++arrived;
      if (posted < total) {
        Check(s, "post receive", PostRecv(o, s, size));
        ++posted;
      }
    }
    if (PatternDiffers(s.rx.data(), size, total - 1, 1) != size) return false;
    Send(o, s, 1, 0);
    if (!Injects(o, s, 1)) WaitOne(s, o.timeout_ms, &e, o.busy);
    return true;
  }
  Check(s, "post receive", PostRecv(o, s, 1));
  int sent = 0, done = 0;
  bool answered = false;
  FillPattern(s.tx.data(), size, total - 1, 1);
  // Injected, a send is done once posted: softfab bounds how many are in
  // flight (-SF_EAGAIN), not the window.
  const bool inject = Injects(o, s, size);
  // An injecting client refused for longer than the timeout gives up.
  int refused_at = -1;
  uint32_t refused_spins = 0;
  int64_t refused_since = 0;
  while (done < total || !answered) {
    while (sent < total && (inject || sent - done < o.window)) {
      const ssize_t r = PostSend(o, s, size);
      if (r == -SF_EAGAIN) break;
      Check(s, "send", r);
      ++sent;
      if (inject) ++done;
    }
    if (sent == done && sent < total) {
      // Refused (-SF_EAGAIN) with no send awaiting its completion: the peer
      // owes credits, which only progress brings in. Drive it, then send
      // again. Injects await none, so this is their flow control: they read
      // the CQ as a waiting program would (a shared simulator moves on while
      // it does), within the timeout.
      if (!inject) {
        (void)sf_cq_read(s.cq, nullptr, 0);
        continue;
      }
      const ssize_t n = sf_cq_read(s.cq, &e, 1);
      if (n == -SF_EAVAIL) DieOfErrorEntry(s);
      if (n < 0 && n != -SF_EAGAIN) Die(s.role, "sf_cq_read", n);
      if (n == 1 && (e.flags & SF_RECV)) answered = true;
      if (n == 1 || sent > refused_at) {
        refused_at = sent;
        refused_since = 0;
      } else if (++refused_spins % 1024 == 0) {
        if (refused_since == 0) {
          refused_since = NowNs();
        } else if (NowNs() - refused_since > int64_t{o.timeout_ms} * 1000000) {
          std::fprintf(stderr,
                       "softfab_pingpong: %s: sends refused for %d ms\n",
                       s.role, o.timeout_ms);
          std::exit(1);
        }
      }
      continue;
    }
    WaitOne(s, o.timeout_ms, &e, o.busy);
    if (e.flags & SF_RECV) {
      answered = true;
    } else {
      ++done;
    }
  }
  return true;
}

// A one-process round (simulator): the client pings, the server pongs.
bool RunSizeTogether(const Options& o, Side& server, Side& client,
                     size_t size) {
  for (int seq = 0; seq < ItersFor(o, size); ++seq) {
    server.rx[size] = 0xA5;
    client.rx[size] = 0xA5;
    Check(server, "post receive", PostRecv(o, server, size + 1));
    Check(client, "post receive", PostRecv(o, client, size + 1));
    Send(o, client, size, seq);
    sf_cq_tagged_entry e{};
    WaitOne(server, o.timeout_ms, &e, o.busy);
    if (!(e.flags & SF_RECV) || e.len != size) return false;
    if (PatternDiffers(server.rx.data(), size, seq, 1) != size) return false;
    Send(o, server, size, seq);
    if (!Complete(o, client, size, seq, 0)) return false;
    if (Injects(o, server, size)) continue;
    WaitOne(server, o.timeout_ms, &e, o.busy);
    if (e.flags & SF_RECV) return false;
  }
  return true;
}

bool ParseSizes(const char* text, std::vector<size_t>* sizes) {
  sizes->clear();
  for (const char* p = text; *p;) {
    char* end = nullptr;
    const unsigned long long v = std::strtoull(p, &end, 10);
    if (end == p || v == 0 || v > (1ull << 30)) return false;
    sizes->push_back(v);
    p = *end == ',' ? end + 1 : end;
    if (*end && *end != ',') return false;
  }
  return !sizes->empty();
}

int Usage() {
  std::fprintf(
      stderr,
      "usage: softfab_pingpong [--backend sim|verbs] [--ep rdm|msg] "
      "[--tagged] [--busy] [--inject] [--stream N [--window W]] [--no-desc] "
      "[--sizes "
      "a,b,...] [--iters N] [--device NAME] "
      "[--port N] [--gid-index N] [--oob-port P] [--timeout-ms T] "
      "[SERVER_IPV4]\n");
  return 2;
}

bool ParseOptions(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
    auto number = [&](int* out) {
      if (v == nullptr) return false;
      char* end = nullptr;
      const long n = std::strtol(v, &end, 10);
      if (*end != '\0') return false;
      *out = static_cast<int>(n);
      ++i;
      return true;
    };
    if (a == "--backend" && v) {
      if (std::strcmp(v, "sim") == 0) {
        o->backend = SF_BACKEND_SIM;
      } else if (std::strcmp(v, "verbs") == 0) {
        o->backend = SF_BACKEND_VERBS;
      } else {
        return false;
      }
      ++i;
    } else if (a == "--ep" && v) {
      if (std::strcmp(v, "rdm") == 0) {
        o->ep_type = SF_EP_RDM;
      } else if (std::strcmp(v, "msg") == 0) {
        o->ep_type = SF_EP_MSG;
      } else {
        return false;
      }
      ++i;
    } else if (a == "--stream") {
      if (!number(&o->stream) || o->stream < 1) return false;
    } else if (a == "--window") {
      if (!number(&o->window) || o->window < 1) return false;
    } else if (a == "--no-desc") {
      o->no_desc = true;
    } else if (a == "--inject") {
      o->inject = true;
    } else if (a == "--busy") {
      o->busy = true;
    } else if (a == "--tagged") {
      o->tagged = true;
    } else if (a == "--sizes" && v) {
      if (!ParseSizes(v, &o->sizes)) return false;
      ++i;
    } else if (a == "--device" && v) {
      o->device = v;
      ++i;
    } else if (a == "--iters") {
      if (!number(&o->iters) || o->iters < 1) return false;
    } else if (a == "--port") {
      if (!number(&o->port)) return false;
    } else if (a == "--gid-index") {
      if (!number(&o->gid_index)) return false;
    } else if (a == "--oob-port") {
      if (!number(&o->oob_port)) return false;
    } else if (a == "--timeout-ms") {
      if (!number(&o->timeout_ms) || o->timeout_ms < 1) return false;
    } else if (a[0] != '-' && o->server.empty()) {
      o->server = a;
    } else {
      return false;
    }
  }
  if (o->sizes.empty()) {
    for (size_t s = 8; s <= (size_t{16} << 20); s *= 8) o->sizes.push_back(s);
    o->sizes.push_back(8192);
    o->sizes.push_back(8193);
    o->sizes.push_back(size_t{16} << 20);
    std::sort(o->sizes.begin(), o->sizes.end());
    o->sizes.erase(std::unique(o->sizes.begin(), o->sizes.end()),
                   o->sizes.end());
  }
  return true;
}

// Connects the two sides: names over TCP (two processes) or directly.
void Wire(const Options& o, Side* me, Side* peer, OobSocket* oob) {
  const bool msg = o.ep_type == SF_EP_MSG;
  const bool server = me->id == 0;
  if (!msg) {
    MakeEndpoint(o, me, nullptr);
    if (peer) MakeEndpoint(o, peer, nullptr);
    std::vector<uint8_t> mine = NameOf(&me->ep->fid, *me);
    std::vector<uint8_t> theirs(SF_NAME_BYTES);
    if (peer) {
      theirs = NameOf(&peer->ep->fid, *peer);
      InsertPeer(peer, mine);
    } else {
      std::string err;
      if (!oob->Exchange(mine.data(), theirs.data(), mine.size(), o.timeout_ms,
                         &err)) {
        std::fprintf(stderr, "softfab_pingpong: name exchange: %s\n",
                     err.c_str());
        std::exit(1);
      }
    }
    InsertPeer(me, theirs);
    return;
  }
  // SF_EP_MSG: the server listens on a passive endpoint, the client connects.
  Side* srv = server ? me : peer;
  Side* cli = server ? peer : me;
  std::vector<uint8_t> pep_name(SF_NAME_BYTES);
  if (srv) {
    Check(*srv, "sf_passive_ep", sf_passive_ep(srv->domain, &srv->pep, srv));
    Check(*srv, "sf_pep_bind", sf_pep_bind(srv->pep, &srv->eq->fid, 0));
    Check(*srv, "sf_listen", sf_listen(srv->pep));
    pep_name = NameOf(&srv->pep->fid, *srv);
  }
  if (oob) {
    std::vector<uint8_t> theirs(SF_NAME_BYTES);
    std::string err;
    if (!oob->Exchange(pep_name.data(), theirs.data(), pep_name.size(),
                       o.timeout_ms, &err)) {
      std::fprintf(stderr, "softfab_pingpong: name exchange: %s\n",
                   err.c_str());
      std::exit(1);
    }
    if (!server) pep_name = theirs;
  }
  if (cli) {
    MakeEndpoint(o, cli, nullptr);
    Check(*cli, "sf_connect", sf_connect(cli->ep, pep_name.data(), "ping", 4));
  }
  if (srv) {
    sf_eq_cm_entry req = WaitEvent(*srv, SF_CONNREQ, o.timeout_ms);
    MakeEndpoint(o, srv, req.info);
    Check(*srv, "sf_accept", sf_accept(srv->ep, "pong", 4));
    sf_freeinfo(req.info);
  }
  if (cli) (void)WaitEvent(*cli, SF_CONNECTED, o.timeout_ms);
  if (srv) (void)WaitEvent(*srv, SF_CONNECTED, o.timeout_ms);
}

}  // namespace

int main(int argc, char** argv) {
  // Each line as it is written, into a file or a pipe too: a run that is killed
  // keeps what it measured, and a script can wait for the header (printed once
  // the two sides are connected) before it acts on a running pair.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  Options o;
  if (!ParseOptions(argc, argv, &o)) return Usage();
  const size_t max_size = *std::max_element(o.sizes.begin(), o.sizes.end());
  sf_fabric_attr fa{};
  fa.backend = o.backend;
  fa.sim_nodes = 2;
  fa.sim_seed = 1;
  if (!o.device.empty()) fa.verbs_device = o.device.c_str();
  fa.verbs_port = o.port;
  if (o.gid_index >= 0) {
    fa.verbs_flags |= SF_VERBS_GID_INDEX;
    fa.verbs_gid_index = o.gid_index;
  }
  sf_fabric* fabric = nullptr;
  if (int rc = sf_fabric_open(&fa, &fabric, nullptr); rc != 0) {
    Die("setup", "sf_fabric_open", rc);
  }
  // On the simulator both sides run in this process, unless the simulated
  // fabric is shared by several processes (softfab run): then, as on verbs,
  // this process is one side.
  const bool together =
      o.backend == SF_BACKEND_SIM && std::getenv("SOFTFAB_FABRIC") == nullptr;
  Side server, client;
  server.role = "server";
  server.id = 0;
  client.role = "client";
  client.id = 1;
  Side* me = o.server.empty() ? &server : &client;
  OobSocket oob;
  if (!together) {
    std::string err;
    const bool ok = me == &server
                        ? oob.Accept("127.0.0.1", o.oob_port, 60000, &err)
                        : oob.Connect(o.server, o.oob_port, 60000, &err);
    if (!ok) {
      std::fprintf(stderr, "softfab_pingpong: %s\n", err.c_str());
      return 1;
    }
  }
  OpenSide(fabric, 0, max_size, me);
  if (together) {
    OpenSide(fabric, 1, max_size, &client);
    server.other = &client;
    client.other = &server;
    Wire(o, &server, &client, nullptr);
  } else {
    Wire(o, me, nullptr, &oob);
  }
  std::printf(
      "%-10s %8s %14s %12s  (%s, %s, %s)\n", "bytes", "iters", "half RTT (us)",
      "MB/s", o.backend == SF_BACKEND_SIM ? "simulator" : "verbs",
      o.ep_type == SF_EP_MSG ? "msg" : "rdm", o.tagged ? "tagged" : "untagged");
  if (o.inject) {
    std::printf("(--inject: messages below %zu bytes by sf_inject)\n",
                me->inject_size);
  }
  bool ok = true;
  for (size_t size : o.sizes) {
    if (!together) {
      std::string err;
      if (!oob.Barrier(o.timeout_ms, &err)) {
        std::fprintf(stderr, "softfab_pingpong: barrier: %s\n", err.c_str());
        return 1;
      }
    }
    const int64_t t0 = NowNs();
    if (o.stream > 0 && !together) {
      const bool good = RunStream(o, *me, size);
      const double s_total = static_cast<double>(NowNs() - t0) / 1e9;
      std::printf("%-10zu %8d %14.3f %12.2f  %s (stream: msg/s, MB/s)\n", size,
                  o.stream, o.stream / s_total,
                  static_cast<double>(size) * o.stream / s_total / 1e6,
                  good ? "ok" : "FAILED");
      std::fflush(stdout);
      if (!good) {
        ok = false;
        break;
      }
      continue;
    }
    const bool good = together ? RunSizeTogether(o, server, client, size)
                               : RunSize(o, *me, size);
    const double us =
        static_cast<double>(NowNs() - t0) / 1e3 / (2.0 * ItersFor(o, size));
    std::printf("%-10zu %8d %14.2f %12.2f  %s\n", size, ItersFor(o, size), us,
                static_cast<double>(size) / us, good ? "bytes ok" : "FAILED");
    std::fflush(stdout);
    if (!good) {
      ok = false;
      break;
    }
  }
  if (!together) {
    std::string err;
    (void)oob.Barrier(o.timeout_ms, &err);  // the peer's last pong is in
  }
  if (o.no_desc) {  // what the registration cache did for this process
    sf_mr_cache_stats c{};
    if (sf_mr_cache_query(me->domain, &c) == 0) {
      std::printf("registration cache: %s, %" PRIu64 " hits, %" PRIu64
                  " registrations, %" PRIu64 " seen unmapped\n",
                  !c.enabled   ? "off"
                  : c.watching ? "on, watching unmaps"
                               : "on, unwatched",
                  c.hits, c.misses, c.unmapped);
    }
  }
  if (o.inject) {
    std::printf("pingpong: %" PRIu64 " messages went by sf_inject\n",
                me->injected + (together ? client.injected : 0));
  }
  std::printf("%s\n", ok ? "pingpong: all messages arrived with their bytes"
                         : "pingpong: FAILED");
  return ok ? 0 : 1;
}
