// Port and GID selection for a VerbsDevice, with the diagnostics that name
// what was found (see selection.h).
#include "backends/verbs/internal/selection.h"

#include <arpa/inet.h>
#include <infiniband/verbs.h>

#include <cerrno>
#include <string>

namespace softfab::verbs::internal {

namespace tp = ::softfab::transport;

const char* PortStateName(tp::PortState state) {
  switch (state) {
    case tp::PortState::kNop:
      return "NOP";
    case tp::PortState::kDown:
      return "DOWN";
    case tp::PortState::kInit:
      return "INIT";
    case tp::PortState::kArmed:
      return "ARMED";
    case tp::PortState::kActive:
      return "ACTIVE";
  }
  return "UNKNOWN";
}

const char* LinkLayerName(uint8_t link_layer) {
  switch (link_layer) {
    case IBV_LINK_LAYER_INFINIBAND:
      return "InfiniBand";
    case IBV_LINK_LAYER_ETHERNET:
      return "Ethernet";
  }
  return "unspecified link layer";
}

const char* GidTypeName(VerbsGidType type) {
  switch (type) {
    case VerbsGidType::kIb:
      return "IB";
    case VerbsGidType::kRoceV1:
      return "RoCEv1";
    case VerbsGidType::kRoceV2:
      return "RoCEv2";
  }
  return "unknown";
}

bool IsIpv4MappedGid(const tp::Gid& gid) {
  for (int i = 0; i < 10; ++i) {
    if (gid.raw[i] != 0) return false;
  }
  return gid.raw[10] == 0xff && gid.raw[11] == 0xff;
}

std::string DescribePorts(const VerbsDeviceInfo& device) {
  std::string out;
  for (const VerbsPortInfo& p : device.ports) {
    if (!out.empty()) out += ", ";
    out += "port " + std::to_string(p.port_num) + ": " +
           PortStateName(p.state) + " (" + LinkLayerName(p.link_layer) + ")";
  }
  return out.empty() ? "no ports" : out;
}

std::string DescribeGids(const VerbsPortInfo& port) {
  std::string out;
  for (const VerbsGidInfo& g : port.gids) {
    if (!out.empty()) out += ", ";
    out += std::to_string(g.index) + " " + FormatGid(g.gid) + " " +
           GidTypeName(g.type);
  }
  return out.empty() ? "none" : out;
}

namespace {

void Set(std::string* diagnostic, std::string text) {
  if (diagnostic != nullptr) *diagnostic = std::move(text);
}

const char kLinkUpHint[] =
    "bring the link up (`ip link set <netdev> up` for RoCE; cable and subnet "
    "manager for InfiniBand)";

}  // namespace

Status SelectPort(const VerbsDeviceInfo& device, uint8_t wanted,
                  const VerbsPortInfo** port, std::string* diagnostic) {
  *port = nullptr;
  if (wanted == 0) {
    for (const VerbsPortInfo& p : device.ports) {
      if (p.state == tp::PortState::kActive) {
        *port = &p;
        return Status::Ok();
      }
    }
    Set(diagnostic, device.name + " has no active port (" +
                        DescribePorts(device) + "): " + kLinkUpHint);
    return Status(ENETDOWN, "no active port");
  }
  for (const VerbsPortInfo& p : device.ports) {
    if (p.port_num != wanted) continue;
    if (p.state != tp::PortState::kActive) {
      Set(diagnostic, device.name + " port " + std::to_string(wanted) + " is " +
                          PortStateName(p.state) +
                          ", not ACTIVE: " + kLinkUpHint);
      return Status(ENETDOWN, "the port is not active");
    }
    *port = &p;
    return Status::Ok();
  }
  Set(diagnostic, device.name + " has no port " + std::to_string(wanted) +
                      " (" + DescribePorts(device) + ")");
  return InvalidArgument("no such port");
}

Status SelectGid(const VerbsDeviceInfo& device, const VerbsPortInfo& port,
                 int wanted, int* index, std::string* diagnostic) {
  const std::string where =
      device.name + " port " + std::to_string(port.port_num);
  if (wanted >= 0) {
    for (const VerbsGidInfo& g : port.gids) {
      if (g.index == wanted) {
        *index = wanted;
        return Status::Ok();
      }
    }
    Set(diagnostic, where + " has no valid GID at index " +
                        std::to_string(wanted) +
                        "; valid entries: " + DescribeGids(port));
    return InvalidArgument("no valid GID at that index");
  }
  if (wanted != -1) {
    Set(diagnostic, "gid_index " + std::to_string(wanted) +
                        " is neither -1 (automatic) nor a table index");
    return InvalidArgument("bad gid_index");
  }
  if (port.link_layer == IBV_LINK_LAYER_ETHERNET) {
    const VerbsGidInfo* first_v2 = nullptr;
    for (const VerbsGidInfo& g : port.gids) {
      if (g.type != VerbsGidType::kRoceV2) continue;
      if (IsIpv4MappedGid(g.gid)) {
        *index = g.index;
        return Status::Ok();
      }
      if (first_v2 == nullptr) first_v2 = &g;
    }
    if (first_v2 != nullptr) {
      *index = first_v2->index;
      return Status::Ok();
    }
    Set(diagnostic, where + " (Ethernet) has no RoCEv2 GID (entries: " +
                        DescribeGids(port) +
                        "): give its netdev an IP address, or pass a "
                        "gid_index");
    return Status(EADDRNOTAVAIL, "no RoCEv2 GID on the port");
  }
  for (const VerbsGidInfo& g : port.gids) {
    if (g.index == 0) {
      *index = 0;
      return Status::Ok();
    }
  }
  Set(diagnostic,
      where + " has no GID at index 0 (entries: " + DescribeGids(port) + ")");
  return Status(EADDRNOTAVAIL, "no GID at index 0");
}

std::string MemlockWarning(bool unlimited, uint64_t soft_limit_bytes) {
  if (unlimited || soft_limit_bytes >= kMemlockWarnBytes) return "";
  return "warning: RLIMIT_MEMLOCK is " +
         std::to_string(soft_limit_bytes / 1024) +
         " KiB; registering more memory than that fails with ENOMEM unless "
         "the process has CAP_IPC_LOCK: raise it with `ulimit -l unlimited` "
         "or a memlock line in /etc/security/limits.conf";
}

}  // namespace softfab::verbs::internal

namespace softfab::verbs {

std::string FormatGid(const transport::Gid& gid) {
  char text[INET6_ADDRSTRLEN] = {};
  if (inet_ntop(AF_INET6, gid.raw, text, sizeof(text)) == nullptr) return "?";
  return text;
}

}  // namespace softfab::verbs
