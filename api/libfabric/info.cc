// fi_getinfo for softfab's provider: one fabric per verbs device (named as
// ibv_devices names it) and one for the simulator ("sim"), each offering
// FI_EP_RDM, FI_EP_MSG and FI_EP_DGRAM; and hint matching, which keeps a
// candidate only when every hint can be met (none met: -FI_ENODATA); and
// node / service addressing on verbs fabrics (address_service.h): the
// address to answer at (FI_SOURCE) or the name a listener answered with.
//
// What the entries promise is what the sf_* API under them does: manual
// progress, FI_THREAD_DOMAIN, 64-bit tags (any mem_tag_format), 8 bytes of
// remote CQ data, FI_ORDER_SAS, four iovecs, FI_MSG_PREFIX (the 40-byte GRH)
// on DGRAM. Registration is never required (mr_mode 0); FI_MR_LOCAL is
// reported when the hints offer it, so descriptors reach the core.
#include <netinet/in.h>
#include <rdma/fi_errno.h>
#include <rdma/providers/fi_log.h>
#include <strings.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "api/libfabric/address_service.h"
#include "api/libfabric/internal/provider_objects.h"
#include "api/softfab/fabric.h"
#include "api/softfab/verbs.h"
#include "backends/simd/client.h"

namespace softfab::libfabric {
namespace {

constexpr uint64_t kCommCaps = FI_LOCAL_COMM | FI_REMOTE_COMM;
constexpr uint64_t kTxCaps = FI_MSG | FI_TAGGED | FI_SEND;
constexpr uint64_t kRxCaps =
    FI_MSG | FI_TAGGED | FI_RECV | FI_DIRECTED_RECV | FI_MULTI_RECV | FI_SOURCE;
constexpr uint64_t kDgramCaps = FI_MSG | FI_SEND | FI_RECV | kCommCaps;
constexpr uint64_t kTxOpFlags = FI_COMPLETION | FI_INJECT_COMPLETE |
                                FI_TRANSMIT_COMPLETE | FI_DELIVERY_COMPLETE;
constexpr uint64_t kRxOpFlags = FI_COMPLETION;
constexpr size_t kQueueSize = 256;  // tx_size / rx_size by default
constexpr size_t kQueueSizeMax = 1 << 16;
constexpr size_t kInjectSize = 256;
constexpr size_t kMaxMsgSize = size_t{1} << 30;
constexpr size_t kPrefixBytes = 40;  // DGRAM: the GRH
constexpr size_t kIovLimit = SF_IOV_LIMIT;
constexpr uint64_t kAllTagBits = ~uint64_t{0};

// FI_VARIABLE_MSG (RDM and MSG) is given only when asked: it changes how
// receives work (buffered, fi_msg(3)), so an fi_info taken without hints
// does not carry it.
constexpr uint64_t kVariableMsgCaps = FI_VARIABLE_MSG;
constexpr size_t kVariableMsgMax = 0xFFFFFFFFu;  // what one RDMA READ reaches

uint64_t CapsOf(fi_ep_type type) {
  if (type == FI_EP_DGRAM) return kDgramCaps;
  uint64_t caps = kTxCaps | kRxCaps | kCommCaps | kVariableMsgCaps;
  return type == FI_EP_MSG ? caps & ~FI_DIRECTED_RECV : caps;
}

// One fabric to offer: its name and, for DGRAM, the largest datagram.
struct FabricEntry {
  std::string name;
  size_t dgram_max = 0;
};

size_t MtuBytes(int mtu) { return mtu >= 1 && mtu <= 5 ? 128u << mtu : 1024; }

// The verbs devices sf_* can use (sfv_get_device_list leaves out the ones
// without an active port or a usable GID), then the simulator. Real devices
// come first so an unqualified fi_getinfo on a host with one picks it; a
// program that wants the simulator names it (fabric "sim" or
// FI_SOFTFAB_BACKEND=sim). With `ip_device` set (node / service addressing:
// the device that owns or reaches the address; "" for a wildcard address)
// only verbs devices are offered, that one when named.
std::string BackendParam() {
  char* backend = nullptr;
  fi_param_get_str(&provider, "backend", &backend);
  return backend ? backend : "";
}

std::vector<FabricEntry> Fabrics(const std::string* ip_device = nullptr,
                                 bool shared_sim = false) {
  const std::string want = BackendParam();
  std::vector<FabricEntry> out;
  if (shared_sim) return {{kSimName, 4096}};
  if (want != kSimName) {
    int n = 0;
    sfv_device** list = sfv_get_device_list(&n);
    for (int i = 0; list != nullptr && i < n; ++i) {
      FabricEntry e;
      e.name = sfv_get_device_name(list[i]);
      if (!want.empty() && want != "verbs" && want != e.name) continue;
      if (ip_device && !ip_device->empty() && *ip_device != e.name) continue;
      e.dgram_max = 1024;
      if (sfv_context* ctx = sfv_open_device(list[i])) {
        sfv_port_attr port{};
        if (sfv_query_port(ctx, 1, &port) == 0) {
          e.dgram_max = MtuBytes(port.active_mtu);
        }
        sfv_close_device(ctx);
      }
      out.push_back(e);
    }
    sfv_free_device_list(list);
  }
  if ((want.empty() || want == kSimName) && ip_device == nullptr) {
    out.push_back({kSimName, 4096});
  }
  return out;
}

// Whether an address of `len` bytes is a sockaddr_in / sockaddr_in6.
bool IsIpAddress(const void* addr, size_t len) {
  const auto family = static_cast<const sockaddr*>(addr)->sa_family;
  return (len == sizeof(sockaddr_in) && family == AF_INET) ||
         (len == sizeof(sockaddr_in6) && family == AF_INET6);
}

// Addresses fi_getinfo's node / service gave: the IP address a listener
// answers at (src), or the name the address answered with (dest).
struct Addressing {
  const IpAddress* src = nullptr;
  const Name* dest = nullptr;
};

// `len` bytes of `from`, malloc'ed as fi_freeinfo frees them.
void* CopyAddress(const void* from, size_t len, size_t* out_len) {
  void* to = malloc(len);
  if (to != nullptr) {
    memcpy(to, from, len);
    *out_len = len;
  }
  return to;
}

bool NameMatches(const char* hint, const std::string& name) {
  return hint == nullptr || name == hint;
}

// Whether the hints' tx / rx attributes can be met (sizes within ours).
bool TxFits(const fi_tx_attr* h, uint64_t caps) {
  if (h == nullptr) return true;
  return (h->caps & ~(caps & kTxCaps)) == 0 &&
         (h->op_flags & ~kTxOpFlags) == 0 &&
         (h->msg_order & ~FI_ORDER_SAS) == 0 &&
         (h->comp_order & ~FI_ORDER_NONE) == 0 &&
         h->inject_size <= kInjectSize && h->size <= kQueueSizeMax &&
         h->iov_limit <= kIovLimit && h->rma_iov_limit == 0;
}
bool RxFits(const fi_rx_attr* h, uint64_t caps) {
  if (h == nullptr) return true;
  return (h->caps & ~(caps & kRxCaps)) == 0 &&
         (h->op_flags & ~kRxOpFlags) == 0 &&
         (h->msg_order & ~FI_ORDER_SAS) == 0 &&
         (h->comp_order & ~FI_ORDER_NONE) == 0 && h->size <= kQueueSizeMax &&
         h->iov_limit <= kIovLimit;
}

bool DomainFits(const fi_domain_attr* h, const std::string& name,
                uint32_t version) {
  if (h == nullptr) return true;
  if (!NameMatches(h->name, name)) return false;
  if (h->threading != FI_THREAD_UNSPEC && h->threading != FI_THREAD_DOMAIN) {
    return false;
  }
  if (h->control_progress == FI_PROGRESS_AUTO ||
      h->data_progress == FI_PROGRESS_AUTO) {
    return false;
  }
  if (h->av_type != FI_AV_UNSPEC && h->av_type != FI_AV_MAP &&
      h->av_type != FI_AV_TABLE) {
    return false;
  }
  // Before 1.5 mr_mode is the FI_MR_BASIC / FI_MR_SCALABLE enum, which
  // softfab meets either way (it needs no registration).
  (void)version;
  return h->cq_data_size <= 8 && (h->caps & ~kCommCaps) == 0 &&
         h->max_ep_tx_ctx <= 1 && h->max_ep_rx_ctx <= 1 &&
         h->max_ep_stx_ctx == 0 && h->max_ep_srx_ctx == 0 && h->cntr_cnt == 0 &&
         h->mr_iov_limit <= 1;
}

bool EpFits(const fi_ep_attr* h, fi_ep_type type, size_t max_msg) {
  if (h == nullptr) return true;
  return (h->type == FI_EP_UNSPEC || h->type == type) &&
         h->protocol == FI_PROTO_UNSPEC && h->max_msg_size <= max_msg &&
         h->tx_ctx_cnt <= 1 && h->rx_ctx_cnt <= 1 && h->auth_key_size == 0;
}

// Whether `hints` can be met by an endpoint of `type` on fabric `f`.
bool Fits(const fi_info* hints, const FabricEntry& f, fi_ep_type type,
          size_t max_msg, uint32_t version) {
  if (hints == nullptr) return true;
  const uint64_t caps = CapsOf(type);
  if ((hints->caps & ~caps) != 0) return false;
  // DGRAM needs FI_MSG_PREFIX room in every buffer: the hints must offer it
  // (in the info's mode or in both the transmit and receive modes), and has
  // no remote CQ data.
  if (type == FI_EP_DGRAM) {
    const bool prefix =
        (hints->mode & FI_MSG_PREFIX) ||
        (hints->tx_attr && hints->rx_attr &&
         (hints->tx_attr->mode & hints->rx_attr->mode & FI_MSG_PREFIX));
    if (!prefix) return false;
    if (hints->domain_attr && hints->domain_attr->cq_data_size > 0) {
      return false;
    }
  }
  if (hints->addr_format != FI_FORMAT_UNSPEC) return false;
  if (hints->dest_addr != nullptr && hints->dest_addrlen != SF_NAME_BYTES) {
    return false;
  }
  // A source address is a name, or an IP address and port to answer at.
  if (hints->src_addr != nullptr && hints->src_addrlen != SF_NAME_BYTES &&
      !IsIpAddress(hints->src_addr, hints->src_addrlen)) {
    return false;
  }
  if (hints->handle != nullptr) return false;
  if (hints->fabric_attr && !NameMatches(hints->fabric_attr->name, f.name)) {
    return false;
  }
  return EpFits(hints->ep_attr, type, max_msg) &&
         DomainFits(hints->domain_attr, f.name, version) &&
         TxFits(hints->tx_attr, caps) && RxFits(hints->rx_attr, caps);
}

// The fi_info of one candidate, shaped by the hints it met.
fi_info* Build(const fi_info* hints, const FabricEntry& f, fi_ep_type type,
               size_t max_msg, const Addressing& at) {
  fi_info* info = fi_allocinfo();
  if (info == nullptr) return nullptr;
  const uint64_t all = CapsOf(type) & ~kVariableMsgCaps;
  uint64_t caps = hints && hints->caps ? hints->caps : all;
  if (caps & FI_VARIABLE_MSG) max_msg = kVariableMsgMax;
  if (!(caps & (FI_SEND | FI_RECV))) caps |= FI_SEND | FI_RECV;
  const uint64_t mode = type == FI_EP_DGRAM ? FI_MSG_PREFIX : 0;
  info->caps = caps;
  info->mode = mode;
  info->addr_format = FI_FORMAT_UNSPEC;
  if (at.dest != nullptr) {
    info->dest_addr =
        CopyAddress(at.dest->data(), SF_NAME_BYTES, &info->dest_addrlen);
  } else if (hints && hints->dest_addr) {
    info->dest_addr =
        CopyAddress(hints->dest_addr, SF_NAME_BYTES, &info->dest_addrlen);
  }
  if (at.src != nullptr) {
    info->src_addr =
        CopyAddress(&at.src->addr, at.src->len, &info->src_addrlen);
  } else if (hints && hints->src_addr) {
    info->src_addr =
        CopyAddress(hints->src_addr, hints->src_addrlen, &info->src_addrlen);
  }

  const fi_tx_attr* htx = hints ? hints->tx_attr : nullptr;
  const fi_rx_attr* hrx = hints ? hints->rx_attr : nullptr;
  fi_tx_attr* tx = info->tx_attr;
  tx->caps = caps & kTxCaps;
  tx->mode = mode;
  tx->op_flags = htx ? htx->op_flags : 0;
  tx->msg_order = FI_ORDER_SAS;
  tx->comp_order = FI_ORDER_NONE;
  tx->inject_size =
      type == FI_EP_DGRAM ? kInjectSize - kPrefixBytes : kInjectSize;
  tx->size = htx && htx->size ? htx->size : kQueueSize;
  tx->iov_limit = kIovLimit;
  tx->rma_iov_limit = 0;
  fi_rx_attr* rx = info->rx_attr;
  rx->caps = caps & kRxCaps;
  rx->mode = mode;
  rx->op_flags = hrx ? hrx->op_flags : 0;
  rx->msg_order = FI_ORDER_SAS;
  rx->comp_order = FI_ORDER_NONE;
  rx->total_buffered_recv = 0;
  rx->size = hrx && hrx->size ? hrx->size : kQueueSize;
  rx->iov_limit = kIovLimit;

  fi_ep_attr* ep = info->ep_attr;
  ep->type = type;
  ep->protocol = FI_PROTO_UNSPEC;
  ep->protocol_version = 1;
  ep->max_msg_size = max_msg;
  ep->msg_prefix_size = type == FI_EP_DGRAM ? kPrefixBytes : 0;
  ep->mem_tag_format = hints && hints->ep_attr && hints->ep_attr->mem_tag_format
                           ? hints->ep_attr->mem_tag_format
                           : kAllTagBits;
  ep->tx_ctx_cnt = 1;
  ep->rx_ctx_cnt = 1;

  fi_domain_attr* d = info->domain_attr;
  const fi_domain_attr* hd = hints ? hints->domain_attr : nullptr;
  d->name = strdup(f.name.c_str());
  d->threading = FI_THREAD_DOMAIN;
  d->control_progress = FI_PROGRESS_MANUAL;
  d->data_progress = FI_PROGRESS_MANUAL;
  d->resource_mgmt = FI_RM_ENABLED;
  d->av_type = hd && hd->av_type != FI_AV_UNSPEC ? hd->av_type : FI_AV_UNSPEC;
  d->mr_mode = hd ? hd->mr_mode & FI_MR_LOCAL : 0;
  d->mr_key_size = 8;
  d->cq_data_size = type == FI_EP_DGRAM ? 0 : 8;
  d->cq_cnt = 1024;
  d->ep_cnt = 1024;
  d->tx_ctx_cnt = 1024;
  d->rx_ctx_cnt = 1024;
  d->max_ep_tx_ctx = 1;
  d->max_ep_rx_ctx = 1;
  d->max_ep_stx_ctx = 0;
  d->max_ep_srx_ctx = 0;
  d->cntr_cnt = 0;
  d->mr_iov_limit = 1;
  d->caps = kCommCaps;
  d->mr_cnt = 65536;

  info->fabric_attr->name = strdup(f.name.c_str());
  info->fabric_attr->prov_version = provider.version;
  return info;
}

}  // namespace

bool SharedSimAddressing() {
  const char* fabric = std::getenv(simd::kFabricEnv);
  const std::string want = BackendParam();
  return fabric != nullptr && *fabric != '\0' &&
         (want.empty() || want == kSimName);
}

bool ParseFabricName(const char* name, FabricChoice* out) {
  if (name == nullptr || *name == '\0') return false;
  out->sim = strcmp(name, kSimName) == 0;
  out->device = out->sim ? "" : name;
  return true;
}

int GetInfo(uint32_t version, const char* node, const char* service,
            uint64_t flags, const fi_info* hints, fi_info** info) {
  if (info == nullptr) return -FI_EINVAL;
  *info = nullptr;
  // Addressing by IP address and port (verbs fabrics; address_service.h):
  // with FI_SOURCE, or a service alone, the address to answer at; else the
  // address of a listener, asked for its name now.
  Addressing at;
  IpAddress ip;
  Name name{};
  std::string device;
  const bool by_ip = node != nullptr || service != nullptr;
  const bool shared_sim = by_ip && SharedSimAddressing();
  if (by_ip) {
    const bool passive = (flags & FI_SOURCE) || node == nullptr;
    std::string why;
    int rc = ParseIpAddress(node, service, passive, &ip, &why);
    if (rc == 0 && passive && node != nullptr && !shared_sim) {
      rc = DeviceOfAddress(ip, &device, &why);
    }
    if (rc == 0 && !passive && shared_sim) {
      rc = LookUpSharedName(ip, &name, &why);
    } else if (rc == 0 && !passive) {
      int timeout_ms = 2000;
      fi_param_get_int(&provider, "lookup_timeout_ms", &timeout_ms);
      rc = LookUpName(ip, timeout_ms, &device, &name, &why);
    }
    if (rc != 0) {
      FI_WARN(&provider, FI_LOG_CORE, "%s\n", why.c_str());
      return rc;
    }
    if (passive) {
      at.src = &ip;
    } else {
      at.dest = &name;
    }
  }
  fi_info* head = nullptr;
  fi_info** tail = &head;
  for (const FabricEntry& f : Fabrics(by_ip ? &device : nullptr, shared_sim)) {
    for (fi_ep_type type : {FI_EP_RDM, FI_EP_MSG, FI_EP_DGRAM}) {
      const size_t max_msg = type == FI_EP_DGRAM ? f.dgram_max : kMaxMsgSize;
      if (!Fits(hints, f, type, max_msg, version)) continue;
      fi_info* one = Build(hints, f, type, max_msg, at);
      if (one == nullptr) {
        fi_freeinfo(head);
        return -FI_ENOMEM;
      }
      *tail = one;
      tail = &one->next;
    }
  }
  if (head == nullptr) return -FI_ENODATA;
  *info = head;
  return 0;
}

}  // namespace softfab::libfabric
