// The verbs backend's public face: opening an RDMA device (rxe, siw, ConnectX
// ...) through libibverbs as a transport::Device, and listing what is there.
//
// The backend translates; it adds no semantics of its own. Every rdma-core
// error convention is turned into a softfab::Status inside backends/verbs.
//
// Port and GID mapping. The transport's Device is one HCA with one port,
// port_num 1, whose GID table has one entry, index 0. The device opened here
// maps them onto the physical port and GID index chosen by VerbsOptions:
// - QueryPort(1) and QueryGid(1, 0) answer for the selected physical port and
//   GID (gid_tbl_len reads 1, phys_port_cnt 1); any other port or index is
//   EINVAL.
// - Port 1 in QpAttr::port_num, and 0 or 1 in AhAttr::port_num, mean the
//   physical port; QP queries map it back to 1.
// - Every address (CreateAh, a QP's primary path at RTR) gets sgid_index = the
//   selected GID index (the caller's grh.sgid_index must be 0) and, on
//   Ethernet (RoCE, which always needs a GRH), is_global = 1 with the caller's
//   grh.dgid, hop_limit, traffic_class and flow_label.
// - Async events for other physical ports are dropped; the selected port's
//   events carry port_num 1.
//
// Threading: creating and destroying objects serialise on a per-device mutex;
// posting and polling are as thread-safe as libibverbs (the provider locks
// each queue). A device and all it created must be used by one process.
#ifndef SOFTFAB_BACKENDS_VERBS_VERBS_DEVICE_H_
#define SOFTFAB_BACKENDS_VERBS_VERBS_DEVICE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "transport/status.h"
#include "transport/transport.h"

namespace softfab::verbs {

struct VerbsOptions {
  // Empty: the first device (in libibverbs' order) with an active port.
  std::string device_name;
  // 0: the first active port of the device.
  uint8_t port = 0;
  // -1: the first RoCEv2 GID (an IPv4-mapped one preferred) on Ethernet, or
  // GID 0 on InfiniBand. Otherwise an index into the port's GID table.
  int gid_index = -1;
};

enum class VerbsGidType : uint8_t {  // ibv_gid_type
  kIb = 0,
  kRoceV1 = 1,
  kRoceV2 = 2,
};

struct VerbsGidInfo {
  int index = 0;
  transport::Gid gid{};
  VerbsGidType type = VerbsGidType::kIb;
};

struct VerbsPortInfo {
  uint8_t port_num = 0;  // physical
  transport::PortState state = transport::PortState::kDown;
  uint8_t link_layer = 0;  // IBV_LINK_LAYER_*: 1 InfiniBand, 2 Ethernet
  transport::Mtu active_mtu = transport::Mtu::k1024;
  std::vector<VerbsGidInfo> gids;  // the valid entries, by index
};

struct VerbsDeviceInfo {
  std::string name;
  uint64_t node_guid = 0;  // host byte order
  std::vector<VerbsPortInfo> ports;
};

// An opened device: a transport::Device that owns its ibv_context and every
// object created through it. Destroying it destroys, in order, the QPs, SRQs,
// CQs, completion channels, AHs, MRs and PDs still alive (acking any
// completion events taken and not acked), then closes the context; pointers
// the caller still holds then dangle.
class VerbsDevice : public transport::Device {
 public:
  ~VerbsDevice() override = default;
  // The physical port and GID index that transport port 1 / GID 0 stand for.
  virtual uint8_t physical_port() const = 0;
  virtual int gid_index() const = 0;
  // IBV_LINK_LAYER_* of the selected port.
  virtual uint8_t link_layer() const = 0;
};

// Opens the device, port and GID that `options` select. `diagnostic` (may be
// null) is always cleared; on failure it says what was found and how to fix
// it, on success it may hold a warning (a small RLIMIT_MEMLOCK). Errors:
// ENODEV no device or no device of that name (the names found are listed);
// ENETDOWN the port (or every port) is not active (its state is named);
// EINVAL no such port or GID index (the valid GID entries are listed);
// EADDRNOTAVAIL no usable GID (e.g. no RoCEv2 GID: the netdev has no address);
// otherwise the errno of the failing libibverbs call (EACCES/EPERM opening
// /dev/infiniband, ENOMEM ...).
StatusOr<std::unique_ptr<VerbsDevice>> OpenVerbsDevice(
    const VerbsOptions& options, std::string* diagnostic);

// Every device libibverbs finds, with its ports and GID tables. Devices that
// cannot be opened or queried are left out and named in `diagnostic` (may be
// null), which also says when there is no device at all.
std::vector<VerbsDeviceInfo> ListVerbsDevices(std::string* diagnostic);

// "::ffff:192.0.2.1", "fe80::...": a GID in IPv6 notation.
std::string FormatGid(const transport::Gid& gid);

}  // namespace softfab::verbs

#endif  // SOFTFAB_BACKENDS_VERBS_VERBS_DEVICE_H_
