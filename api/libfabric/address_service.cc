// Name lookups by IP address and port over the RDMA connection manager; see
// address_service.h. The query is a connection request whose private data
// is kQuery; the answer is its rejection whose private data is kAnswer and
// the name. A request without the query (another program's) is rejected
// with nothing, as a port without a listener would be.
#include "api/libfabric/address_service.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <rdma/fi_errno.h>
#include <rdma/rdma_cma.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "backends/simd/address_client.h"

namespace softfab::libfabric {
namespace {

constexpr uint8_t kQuery[8] = {'s', 'f', 'n', 'a', 'm', 'e', '?', 1};
constexpr uint8_t kAnswer[8] = {'s', 'f', 'n', 'a', 'm', 'e', '!', 1};

std::string HostOf(const IpAddress& a) {
  char host[NI_MAXHOST] = "?";
  char port[NI_MAXSERV] = "?";
  getnameinfo(reinterpret_cast<const sockaddr*>(&a.addr), a.len, host,
              sizeof host, port, sizeof port, NI_NUMERICHOST | NI_NUMERICSERV);
  return std::string(host) + ":" + port;
}

// A connection-manager channel and one id on it, released together.
struct CmId {
  rdma_event_channel* channel = nullptr;
  rdma_cm_id* id = nullptr;
  ~CmId() {
    if (id != nullptr) rdma_destroy_id(id);
    if (channel != nullptr) rdma_destroy_event_channel(channel);
  }
  int Open(std::string* why) {
    channel = rdma_create_event_channel();
    if (channel == nullptr) {
      *why = std::string("the RDMA connection manager is not available (") +
             strerror(errno) + "; is the rdma_ucm module loaded?)";
      return -FI_ENODEV;
    }
    if (rdma_create_id(channel, &id, nullptr, RDMA_PS_TCP) != 0) {
      id = nullptr;
      *why = std::string("rdma_create_id: ") + strerror(errno);
      return -FI_ENOMEM;
    }
    return 0;
  }
};

using Clock = std::chrono::steady_clock;

// The next event on `channel` before `deadline`, or -FI_ETIMEDOUT.
int NextEvent(rdma_event_channel* channel, Clock::time_point deadline,
              rdma_cm_event** event) {
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          deadline - Clock::now())
                          .count();
    if (left <= 0) return -FI_ETIMEDOUT;
    pollfd p{channel->fd, POLLIN, 0};
    const int n = poll(&p, 1, static_cast<int>(left));
    if (n < 0 && errno != EINTR) return -errno;
    if (n > 0) return rdma_get_cm_event(channel, event) == 0 ? 0 : -errno;
  }
}

// Waits for `want`; any other event is the failure it names.
int Expect(rdma_event_channel* channel, Clock::time_point deadline,
           rdma_cm_event_type want, const std::string& where,
           std::string* why) {
  rdma_cm_event* event = nullptr;
  int rc = NextEvent(channel, deadline, &event);
  if (rc != 0) {
    *why = where + ": " + (rc == -FI_ETIMEDOUT ? "timed out" : strerror(-rc));
    return rc;
  }
  const rdma_cm_event_type got = event->event;
  rdma_ack_cm_event(event);
  if (got == want) return 0;
  *why = where + ": " + rdma_event_str(got);
  return got == RDMA_CM_EVENT_ADDR_ERROR ? -FI_EADDRNOTAVAIL : -FI_EHOSTUNREACH;
}

}  // namespace

int ParseIpAddress(const char* node, const char* service, bool passive,
                   IpAddress* out, std::string* why) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  addrinfo* list = nullptr;
  const int rc = getaddrinfo(node, service ? service : "0", &hints, &list);
  if (rc != 0) {
    *why = std::string("cannot resolve ") + (node ? node : "(any)") + ":" +
           (service ? service : "0") + ": " + gai_strerror(rc);
    return -FI_EINVAL;
  }
  // IPv4 first: RoCE devices carry an IPv4-mapped GID for each address.
  const addrinfo* pick = list;
  for (const addrinfo* a = list; a != nullptr; a = a->ai_next) {
    if (a->ai_family == AF_INET) {
      pick = a;
      break;
    }
  }
  memcpy(&out->addr, pick->ai_addr, pick->ai_addrlen);
  out->len = pick->ai_addrlen;
  freeaddrinfo(list);
  return 0;
}

int DeviceOfAddress(const IpAddress& addr, std::string* device,
                    std::string* why) {
  CmId cm;
  if (int rc = cm.Open(why); rc != 0) return rc;
  IpAddress any_port = addr;
  if (any_port.addr.ss_family == AF_INET) {
    reinterpret_cast<sockaddr_in*>(&any_port.addr)->sin_port = 0;
  } else {
    reinterpret_cast<sockaddr_in6*>(&any_port.addr)->sin6_port = 0;
  }
  if (rdma_bind_addr(cm.id, reinterpret_cast<sockaddr*>(&any_port.addr)) != 0) {
    *why = "no RDMA device owns " + HostOf(addr) + " (" + strerror(errno) + ")";
    return -FI_EADDRNOTAVAIL;
  }
  device->assign(cm.id->verbs ? ibv_get_device_name(cm.id->verbs->device) : "");
  return 0;
}

int LookUpName(const IpAddress& addr, int timeout_ms, std::string* device,
               Name* name, std::string* why) {
  CmId cm;
  if (int rc = cm.Open(why); rc != 0) return rc;
  const std::string where = HostOf(addr);
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  auto* dst =
      reinterpret_cast<sockaddr*>(const_cast<sockaddr_storage*>(&addr.addr));
  if (rdma_resolve_addr(cm.id, nullptr, dst, timeout_ms) != 0) {
    *why = where + ": " + strerror(errno);
    return -FI_EADDRNOTAVAIL;
  }
  int rc = Expect(cm.channel, deadline, RDMA_CM_EVENT_ADDR_RESOLVED,
                  where + ": no RDMA device reaches it", why);
  if (rc != 0) return rc;
  device->assign(ibv_get_device_name(cm.id->verbs->device));
  if (rdma_resolve_route(cm.id, timeout_ms) != 0) {
    *why = where + ": " + strerror(errno);
    return -FI_EHOSTUNREACH;
  }
  rc = Expect(cm.channel, deadline, RDMA_CM_EVENT_ROUTE_RESOLVED,
              where + ": no route", why);
  if (rc != 0) return rc;
  rdma_conn_param param{};
  param.private_data = kQuery;
  param.private_data_len = sizeof kQuery;
  param.qp_num = 1;  // no queue pair: the request is only a question
  if (rdma_connect(cm.id, &param) != 0) {
    *why = where + ": " + strerror(errno);
    return -FI_ECONNREFUSED;
  }
  rdma_cm_event* event = nullptr;
  rc = NextEvent(cm.channel, deadline, &event);
  if (rc != 0) {
    *why = where + ": no answer (" +
           (rc == -FI_ETIMEDOUT ? "timed out" : strerror(-rc)) + ")";
    return rc;
  }
  const rdma_cm_event_type got = event->event;
  const auto* data =
      static_cast<const uint8_t*>(event->param.conn.private_data);
  const size_t len = event->param.conn.private_data_len;
  const bool answered = got == RDMA_CM_EVENT_REJECTED && data != nullptr &&
                        len >= sizeof kAnswer + SF_NAME_BYTES &&
                        memcmp(data, kAnswer, sizeof kAnswer) == 0;
  if (answered) memcpy(name->data(), data + sizeof kAnswer, SF_NAME_BYTES);
  rdma_ack_cm_event(event);
  if (got == RDMA_CM_EVENT_ESTABLISHED) rdma_disconnect(cm.id);
  if (answered) return 0;
  *why = where + ": no softfab endpoint listens there (" + rdma_event_str(got) +
         ")";
  return -FI_ECONNREFUSED;
}

int NameResponder::Start(const IpAddress& addr, const Name& name,
                         std::unique_ptr<Answerer>* out, std::string* why) {
  std::unique_ptr<NameResponder> r(new NameResponder);
  CmId cm;
  if (int rc = cm.Open(why); rc != 0) return rc;
  auto* src =
      reinterpret_cast<sockaddr*>(const_cast<sockaddr_storage*>(&addr.addr));
  if (rdma_bind_addr(cm.id, src) != 0) {
    const int err = errno;
    *why = "cannot listen at " + HostOf(addr) + ": " + strerror(err);
    return err == EADDRINUSE ? -FI_EADDRINUSE : -FI_EADDRNOTAVAIL;
  }
  if (rdma_listen(cm.id, 64) != 0) {
    const int err = errno;
    *why = "rdma_listen at " + HostOf(addr) + ": " + strerror(err);
    return err == EADDRINUSE ? -FI_EADDRINUSE : -FI_EOTHER;
  }
  const int flags = fcntl(cm.channel->fd, F_GETFL);
  r->stop_fd_ = eventfd(0, EFD_CLOEXEC);
  if (flags < 0 || fcntl(cm.channel->fd, F_SETFL, flags | O_NONBLOCK) != 0 ||
      r->stop_fd_ < 0) {
    *why = std::string("cannot set up the listener: ") + strerror(errno);
    return -FI_EOTHER;
  }
  r->bound_ = addr;
  if (const sockaddr* local = rdma_get_local_addr(cm.id)) {
    r->bound_.len = local->sa_family == AF_INET ? sizeof(sockaddr_in)
                                                : sizeof(sockaddr_in6);
    memcpy(&r->bound_.addr, local, r->bound_.len);
  }
  r->name_ = name;
  r->channel_ = cm.channel;
  r->listener_ = cm.id;
  cm.channel = nullptr;
  cm.id = nullptr;
  r->thread_ = std::thread(&NameResponder::Serve, r.get());
  *out = std::move(r);
  return 0;
}

void NameResponder::Serve() {
  uint8_t answer[sizeof kAnswer + SF_NAME_BYTES];
  memcpy(answer, kAnswer, sizeof kAnswer);
  memcpy(answer + sizeof kAnswer, name_.data(), SF_NAME_BYTES);
  for (;;) {
    pollfd p[2] = {{channel_->fd, POLLIN, 0}, {stop_fd_, POLLIN, 0}};
    if (poll(p, 2, -1) < 0 && errno != EINTR) return;
    if (p[1].revents != 0) return;
    rdma_cm_event* event = nullptr;
    while (rdma_get_cm_event(channel_, &event) == 0) {
      if (event->event != RDMA_CM_EVENT_CONNECT_REQUEST) {
        rdma_ack_cm_event(event);
        continue;
      }
      rdma_cm_id* request = event->id;
      const auto* data =
          static_cast<const uint8_t*>(event->param.conn.private_data);
      const bool query = data != nullptr &&
                         event->param.conn.private_data_len >= sizeof kQuery &&
                         memcmp(data, kQuery, sizeof kQuery) == 0;
      rdma_reject(request, query ? answer : nullptr, query ? sizeof answer : 0);
      rdma_ack_cm_event(event);
      rdma_destroy_id(request);
    }
  }
}

NameResponder::~NameResponder() {
  if (thread_.joinable()) {
    const uint64_t one = 1;
    (void)!write(stop_fd_, &one, sizeof one);
    thread_.join();
  }
  if (listener_ != nullptr) rdma_destroy_id(listener_);
  if (channel_ != nullptr) rdma_destroy_event_channel(channel_);
  if (stop_fd_ >= 0) close(stop_fd_);
}

namespace {

// The IPv4 address (host order) and port of `addr`; false for IPv6.
bool Ipv4Of(const IpAddress& addr, uint32_t* ip, uint16_t* port,
            std::string* why) {
  if (addr.addr.ss_family != AF_INET) {
    *why = "the shared simulated fabric's addresses are IPv4";
    return false;
  }
  const auto* in = reinterpret_cast<const sockaddr_in*>(&addr.addr);
  *ip = ntohl(in->sin_addr.s_addr);
  *port = ntohs(in->sin_port);
  return true;
}

class SharedAnswerer : public Answerer {
 public:
  explicit SharedAnswerer(std::unique_ptr<simd::AddressBinding> b)
      : binding_(std::move(b)) {}

 private:
  std::unique_ptr<simd::AddressBinding> binding_;
};

int FiErrno(int code) {
  switch (code) {
    case ECONNREFUSED:
      return -FI_ECONNREFUSED;
    case EADDRINUSE:
      return -FI_EADDRINUSE;
    default:
      return -FI_EIO;
  }
}

}  // namespace

int LookUpSharedName(const IpAddress& addr, Name* name, std::string* why) {
  uint32_t ip = 0;
  uint16_t port = 0;
  if (!Ipv4Of(addr, &ip, &port, why)) return -FI_EINVAL;
  uint8_t raw[simd::kNameBytes];
  const Status s = simd::LookUpAddress(ip, port, raw, why);
  if (!s.ok()) {
    *why = HostOf(addr) + ": " + *why;
    return FiErrno(s.code());
  }
  std::memcpy(name->data(), raw, SF_NAME_BYTES);
  return 0;
}

int StartSharedAnswerer(const IpAddress& addr, const Name& name,
                        std::unique_ptr<Answerer>* out, std::string* why) {
  uint32_t ip = 0;
  uint16_t port = 0;
  if (!Ipv4Of(addr, &ip, &port, why)) return -FI_EINVAL;
  if (port == 0) {
    *why = "a listener on the shared simulated fabric needs a port";
    return -FI_EINVAL;
  }
  uint8_t raw[simd::kNameBytes];
  std::memcpy(raw, name.data(), SF_NAME_BYTES);
  auto binding = simd::BindAddress(ip, port, raw, why);
  if (!binding.ok()) {
    *why = "cannot listen at " + HostOf(addr) + ": " + *why;
    return FiErrno(binding.status().code());
  }
  *out = std::make_unique<SharedAnswerer>(std::move(*binding));
  return 0;
}

}  // namespace softfab::libfabric
