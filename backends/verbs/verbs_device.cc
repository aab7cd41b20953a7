// Finding and opening a verbs device: libibverbs' device list, each device's
// ports and GID tables, the choice of device/port/GID with its diagnostics,
// the inline-data probe and the RLIMIT_MEMLOCK check.
#include "backends/verbs/verbs_device.h"

#include <endian.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <sys/resource.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "backends/verbs/internal/errors.h"
#include "backends/verbs/internal/objects.h"
#include "backends/verbs/internal/selection.h"
#include "backends/verbs/internal/translate.h"

namespace softfab::verbs {

namespace {

using internal::ErrnoOrFallback;

// Frees libibverbs' device list on every path.
struct DeviceList {
  ibv_device** devices = nullptr;
  int count = 0;
  ~DeviceList() {
    if (devices != nullptr) ibv_free_device_list(devices);
  }
};

// fork(2) and pinned memory. From Linux 5.13 the kernel copies pinned pages
// into the child at fork (libibverbs reports IBV_FORK_UNNEEDED): nothing to
// do, and a child that only execs (system(3), a helper) leaves every transfer
// of the parent right. On older kernels the parent's pinned pages become
// copy-on-write at fork, and the parent's next write to one moves it away from
// the device's DMA: a silent corruption. There softfab asks libibverbs for its
// fork support (ibv_fork_init, as UCX's IB_FORK_INIT=try does) before it
// registers anything, unless SOFTFAB_FORK_INIT=0: registered ranges are then
// left out of the child (MADV_DONTFORK), which must not touch them. (rdma-core
// also turns it on by itself under RDMAV_FORK_SAFE=1.) Refused when the
// process registered memory before softfab's first device: softfab carries on
// as the kernel allows, and the README says so. Once per process: the answer
// is the kernel's and libibverbs' (process-wide), and asking costs a device
// context each time (seconds per hundred opens under emulation).
void PrepareForFork() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (ibv_is_fork_initialized() != IBV_FORK_DISABLED) return;
    const char* env = std::getenv("SOFTFAB_FORK_INIT");
    if (env != nullptr && std::strcmp(env, "0") == 0) return;
    (void)ibv_fork_init();
  });
}

// Fetches the device list; ENODEV with the no-device hint when it is empty.
Status GetDevices(DeviceList* list, std::string* diagnostic) {
  PrepareForFork();
  list->devices = ibv_get_device_list(&list->count);
  if (list->devices == nullptr) {
    const int code = ErrnoOrFallback(ENODEV);
    *diagnostic =
        std::string(code == ENOSYS
                        ? "the kernel offers no RDMA verbs "
                          "(is ib_uverbs loaded?); "
                        : "ibv_get_device_list failed (" +
                              std::string(std::strerror(code)) + "); ") +
        internal::kNoDeviceHint;
    return Status(ENODEV, "no RDMA device");
  }
  if (list->count == 0) {
    *diagnostic = internal::kNoDeviceHint;
    return Status(ENODEV, "no RDMA device");
  }
  return Status::Ok();
}

// An opened context, closed unless released.
struct Context {
  ibv_context* context = nullptr;
  ~Context() {
    if (context != nullptr) (void)ibv_close_device(context);
  }
  ibv_context* Release() { return std::exchange(context, nullptr); }
};

// The valid GID entries of every port, from ibv_query_gid_table.
void ReadGids(ibv_context* context, VerbsDeviceInfo* info, size_t entries_max) {
  std::vector<ibv_gid_entry> entries(std::max<size_t>(entries_max, 1));
  const ssize_t n =
      ibv_query_gid_table(context, entries.data(), entries.size(), 0);
  for (ssize_t i = 0; i < n; ++i) {
    const ibv_gid_entry& e = entries[i];
    for (VerbsPortInfo& p : info->ports) {
      if (p.port_num != e.port_num) continue;
      VerbsGidInfo g;
      g.index = static_cast<int>(e.gid_index);
      std::memcpy(g.gid.raw, e.gid.raw, sizeof(g.gid.raw));
      g.type = static_cast<VerbsGidType>(e.gid_type);
      p.gids.push_back(g);
    }
  }
  for (VerbsPortInfo& p : info->ports) {
    std::sort(p.gids.begin(), p.gids.end(),
              [](const VerbsGidInfo& a, const VerbsGidInfo& b) {
                return a.index < b.index;
              });
  }
}

// Name, node GUID, ports and GID tables of an opened device.
Status ReadDeviceInfo(ibv_context* context, VerbsDeviceInfo* info,
                      ibv_device_attr* attr) {
  info->name = ibv_get_device_name(context->device);
  if (Status s = internal::FromReturn(ibv_query_device(context, attr),
                                      "ibv_query_device failed");
      !s.ok()) {
    return s;
  }
  info->node_guid = be64toh(attr->node_guid);
  size_t gids_max = 0;
  for (int port = 1; port <= attr->phys_port_cnt; ++port) {
    ibv_port_attr pa{};
    if (Status s = internal::FromReturn(
            ibv_query_port(context, static_cast<uint8_t>(port), &pa),
            "ibv_query_port failed");
        !s.ok()) {
      return s;
    }
    VerbsPortInfo p;
    p.port_num = static_cast<uint8_t>(port);
    p.state = internal::ToPortState(pa.state);
    p.link_layer = pa.link_layer;
    p.active_mtu = static_cast<transport::Mtu>(pa.active_mtu);
    info->ports.push_back(p);
    gids_max += static_cast<size_t>(std::max(pa.gid_tbl_len, 0));
  }
  ReadGids(context, info, gids_max);
  return Status::Ok();
}

// The inline data an RC QP is granted when asked for `bytes`, or -1 if the
// device refuses.
int64_t TryInline(ibv_pd* pd, ibv_cq* cq, uint32_t bytes) {
  ibv_qp_init_attr init{};
  init.send_cq = cq;
  init.recv_cq = cq;
  init.qp_type = IBV_QPT_RC;
  init.cap.max_send_wr = 1;
  init.cap.max_recv_wr = 1;
  init.cap.max_send_sge = 1;
  init.cap.max_recv_sge = 1;
  init.cap.max_inline_data = bytes;
  ibv_qp* qp = ibv_create_qp(pd, &init);
  if (qp == nullptr) return -1;
  (void)ibv_destroy_qp(qp);
  return init.cap.max_inline_data;
}

// ibv_device_attr has no inline limit: ask the device by creating QPs
// (a binary search up to 4 KiB, a dozen QPs). 0 if it cannot be asked.
uint32_t ProbeMaxInline(ibv_context* context) {
  ibv_pd* pd = ibv_alloc_pd(context);
  if (pd == nullptr) return 0;
  ibv_cq* cq = ibv_create_cq(context, 1, nullptr, nullptr, 0);
  uint32_t best = 0;
  if (cq != nullptr) {
    uint32_t lo = 1;
    uint32_t hi = 4096;
    while (lo <= hi) {
      const uint32_t mid = lo + (hi - lo) / 2;
      const int64_t granted = TryInline(pd, cq, mid);
      if (granted < 0) {
        hi = mid - 1;
      } else {
        best = std::max(best, static_cast<uint32_t>(granted));
        lo = std::max(mid, static_cast<uint32_t>(granted)) + 1;
      }
    }
    (void)ibv_destroy_cq(cq);
  }
  (void)ibv_dealloc_pd(pd);
  return best;
}

std::string MemlockCheck() {
  rlimit limit{};
  if (getrlimit(RLIMIT_MEMLOCK, &limit) != 0) return "";
  return internal::MemlockWarning(limit.rlim_cur == RLIM_INFINITY,
                                  static_cast<uint64_t>(limit.rlim_cur));
}

void Append(std::string* text, const std::string& more) {
  if (more.empty()) return;
  if (!text->empty()) *text += "; ";
  *text += more;
}

// Opens `device` and selects its port and GID. On success *setup holds the
// context (owned by the caller).
Status OpenOne(ibv_device* device, const VerbsOptions& options,
               internal::DeviceSetup* setup, std::string* why) {
  const std::string name = ibv_get_device_name(device);
  Context ctx;
  ctx.context = ibv_open_device(device);
  if (ctx.context == nullptr) {
    const int code = ErrnoOrFallback(ENODEV);
    *why = "cannot open " + name + ": " + std::strerror(code) +
           " (check access to /dev/infiniband/uverbs*)";
    return Status(code, "ibv_open_device failed");
  }
  VerbsDeviceInfo info;
  if (Status s = ReadDeviceInfo(ctx.context, &info, &setup->attr); !s.ok()) {
    *why = "cannot query " + name + ": " + s.message();
    return s;
  }
  const VerbsPortInfo* port = nullptr;
  if (Status s = internal::SelectPort(info, options.port, &port, why);
      !s.ok()) {
    return s;
  }
  int gid_index = 0;
  if (Status s =
          internal::SelectGid(info, *port, options.gid_index, &gid_index, why);
      !s.ok()) {
    return s;
  }
  // Async events are taken without blocking (Device::GetAsyncEvent).
  const int fd = ctx.context->async_fd;
  const int flags = fcntl(fd, F_GETFL);
  if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) {
    const int code = ErrnoOrFallback(EIO);
    *why = "cannot make " + name +
           "'s async fd non-blocking: " + std::strerror(code);
    return Status(code, "fcntl on the async event fd failed");
  }
  setup->map.physical_port = port->port_num;
  setup->map.gid_index = static_cast<uint8_t>(gid_index);
  setup->map.ethernet = port->link_layer == IBV_LINK_LAYER_ETHERNET;
  setup->link_layer = port->link_layer;
  setup->max_inline_data = ProbeMaxInline(ctx.context);
  setup->context = ctx.Release();
  return Status::Ok();
}

}  // namespace

StatusOr<std::unique_ptr<VerbsDevice>> OpenVerbsDevice(
    const VerbsOptions& options, std::string* diagnostic) {
  std::string local;
  std::string* diag = diagnostic != nullptr ? diagnostic : &local;
  diag->clear();
  DeviceList list;
  if (Status s = GetDevices(&list, diag); !s.ok()) return s;
  const bool named = !options.device_name.empty();
  std::string found;
  Status first_failure;
  std::string failures;
  for (int i = 0; i < list.count; ++i) {
    const std::string name = ibv_get_device_name(list.devices[i]);
    found += (found.empty() ? "" : ", ") + name;
    if (named && name != options.device_name) continue;
    internal::DeviceSetup setup;
    std::string why;
    Status s = OpenOne(list.devices[i], options, &setup, &why);
    if (s.ok()) {
      *diag = MemlockCheck();
      return std::unique_ptr<VerbsDevice>(
          std::make_unique<internal::DeviceImpl>(setup));
    }
    if (named) {
      *diag = why;
      return s;
    }
    if (first_failure.ok()) first_failure = s;
    Append(&failures, why);
  }
  if (named) {
    *diag = "no RDMA device named " + options.device_name + "; found: " + found;
    return Status(ENODEV, "no RDMA device of that name");
  }
  *diag = "no usable RDMA device: " + failures;
  return first_failure;
}

std::vector<VerbsDeviceInfo> ListVerbsDevices(std::string* diagnostic) {
  std::string local;
  std::string* diag = diagnostic != nullptr ? diagnostic : &local;
  diag->clear();
  std::vector<VerbsDeviceInfo> out;
  DeviceList list;
  if (!GetDevices(&list, diag).ok()) return out;
  for (int i = 0; i < list.count; ++i) {
    const std::string name = ibv_get_device_name(list.devices[i]);
    Context ctx;
    ctx.context = ibv_open_device(list.devices[i]);
    if (ctx.context == nullptr) {
      Append(diag, "cannot open " + name + ": " +
                       std::strerror(ErrnoOrFallback(ENODEV)));
      continue;
    }
    VerbsDeviceInfo info;
    ibv_device_attr attr{};
    if (Status s = ReadDeviceInfo(ctx.context, &info, &attr); !s.ok()) {
      Append(diag, "cannot query " + name + ": " + s.message());
      continue;
    }
    out.push_back(std::move(info));
  }
  return out;
}

}  // namespace softfab::verbs
