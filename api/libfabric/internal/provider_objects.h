// The objects behind the fid_* handles softfab's libfabric provider hands
// out, shared by the files of //api/libfabric:softfab-fi and nothing else.
//
// Each object starts with the libfabric struct the application holds (so a
// fid pointer is the object) and owns the sf_* object it forwards to: the
// provider is a face over the public sf_* API (api/softfab/fabric.h), whose
// flag values, error numbers and entry layouts are libfabric's already, so
// most calls pass their arguments straight through. Every sf_* object is
// opened with its provider object as context, which maps the sf_fid an
// event reports back to the application's fid.
#ifndef SOFTFAB_API_LIBFABRIC_INTERNAL_PROVIDER_OBJECTS_H_
#define SOFTFAB_API_LIBFABRIC_INTERNAL_PROVIDER_OBJECTS_H_

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_tagged.h>
#include <rdma/providers/fi_prov.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "api/libfabric/address_service.h"
#include "api/softfab/fabric.h"

namespace softfab::libfabric {

// The provider record libfabric keeps (fi_prov_ini returns it); parameters
// are declared and read through it.
extern struct fi_provider provider;

// The name fi_info shows for the simulated fabric (and its one domain).
inline constexpr char kSimName[] = "sim";
// Nodes a simulated fabric has unless FI_SOFTFAB_SIM_NODES says otherwise.
inline constexpr int kSimNodesDefault = 16;

// Which fabric an fi_info (or fi_fabric_attr) names: the simulator, or the
// verbs device of that name.
struct FabricChoice {
  bool sim = true;
  std::string device;  // verbs only
};

struct Cq;
struct Eq;

struct Fabric {
  fid_fabric fid;  // first: the application's handle is this object
  sf_fabric* sf = nullptr;
  FabricChoice choice;
  // Simulator: the node the next domain or passive endpoint takes.
  int next_node = 0;
  int nodes = 1;
  int children = 0;
  // For fi_eq_strerror: any open CQ can name a prov_errno.
  std::vector<Cq*> cqs;
  // Connection requests handed out in FI_CONNREQ events: each fi_info's
  // handle points at one; they live until the fabric closes.
  std::vector<std::unique_ptr<struct ConnReq>> connreqs;
};

struct Domain {
  fid_domain fid;
  Fabric* fabric = nullptr;
  sf_domain* sf = nullptr;
  int node = 0;
  int children = 0;
  uint64_t next_key = 0;  // the last fi_mr_key handed out
};

struct Mr {
  fid_mr fid;
  Domain* domain = nullptr;
  sf_mr* sf = nullptr;
};

struct Av {
  fid_av fid;
  Domain* domain = nullptr;
  sf_av* sf = nullptr;
};

struct Cq {
  fid_cq fid;
  Domain* domain = nullptr;
  sf_cq* sf = nullptr;
};

struct Eq {
  fid_eq fid;
  Fabric* fabric = nullptr;
  sf_eq* sf = nullptr;
};

// A connection request (FI_CLASS_CONNREQ): what fi_info::handle points at in
// an FI_CONNREQ event, for fi_endpoint (which accepts it) or fi_reject.
struct ConnReq {
  struct fid fid;
  sf_info* sf = nullptr;  // released once rejected, or with the fabric
  bool owned = true;      // false: a peeked request, the sf_eq's to release
  int node = 0;           // the listener's node: the accepting domain's
};

struct Pep {
  fid_pep fid;
  Fabric* fabric = nullptr;
  sf_domain* domain = nullptr;  // the node it listens on (its own)
  sf_pep* sf = nullptr;
  int node = 0;
  fi_info* info = nullptr;  // its fi_info, copied into every FI_CONNREQ
  // An fi_info whose src_addr is an IP address and port: where fi_listen
  // starts answering lookups of the name (address_service.h).
  std::unique_ptr<IpAddress> answer_at;
  std::unique_ptr<Answerer> responder;
};

struct Ep {
  fid_ep fid;
  Domain* domain = nullptr;
  sf_ep* sf = nullptr;
  // The fi_info's tx_attr / rx_attr op_flags, for calls without flags.
  uint64_t tx_flags = 0;
  uint64_t rx_flags = 0;
  // As Pep's: where fi_enable starts answering lookups of the name.
  std::unique_ptr<IpAddress> answer_at;
  std::unique_ptr<Answerer> responder;
};

// The IP address an fi_info's src_addr holds (node / service addressing),
// or null when it holds a name or nothing.
std::unique_ptr<IpAddress> AnswerAddressOf(const fi_info* info);
// Starts answering lookups at `*at` with the name of `f` (an sf_ep or
// sf_pep) of `fabric`; nothing when `at` is null.
int StartAnswering(const Fabric& fabric, const IpAddress* at, sf_fid* f,
                   std::unique_ptr<Answerer>* responder);
// Node / service addressing goes through the shared simulated fabric's
// daemon (SOFTFAB_FABRIC set, and the simulator chosen or allowed).
bool SharedSimAddressing();

// Fills an object's fid header.
inline void InitFid(fid* f, size_t fclass, void* context, fi_ops* ops) {
  f->fclass = fclass;
  f->context = context;
  f->ops = ops;
}

// The provider object an sf_* object was opened for (its context).
template <typename T>
T* OwnerOf(const sf_fid* f) {
  return static_cast<T*>(f->context);
}

// ---- What each file provides to the others ----

// api/libfabric/info.cc: the fi_info list for fi_getinfo; what a fabric
// name means.
int GetInfo(uint32_t version, const char* node, const char* service,
            uint64_t flags, const fi_info* hints, fi_info** info);
bool ParseFabricName(const char* name, FabricChoice* out);

// api/libfabric/fabric.cc
int OpenFabric(fi_fabric_attr* attr, fid_fabric** fabric, void* context);

// api/libfabric/domain.cc
int OpenDomain(fid_fabric* fabric, fi_info* info, fid_domain** domain,
               void* context);
// The node a domain or passive endpoint opened with `info` takes: a
// connection request's listener's; "sim:N" (domain name) node N; else the
// fabric's next one. -FI_EINVAL for a name of another fabric or node.
int NodeFor(Fabric* fabric, const fi_info* info, int* node);
int OpenEq(fid_fabric* fabric, fi_eq_attr* attr, fid_eq** eq, void* context);

// api/libfabric/completion.cc
int OpenCq(fid_domain* domain, fi_cq_attr* attr, fid_cq** cq, void* context);
int TryWait(fid_fabric* fabric, fid** fids, int count);

// api/libfabric/endpoint.cc
int OpenEndpoint(fid_domain* domain, fi_info* info, fid_ep** ep, void* context);
int OpenPassiveEp(fid_fabric* fabric, fi_info* info, fid_pep** pep,
                  void* context);

// api/libfabric/data_path.cc: fi_msg and fi_tagged, forwarded.
extern fi_ops_msg msg_ops;
extern fi_ops_tagged tagged_ops;
// The same for endpoints whose operations carry default flags (tx_attr /
// rx_attr op_flags with FI_COMPLETION, for FI_SELECTIVE_COMPLETION): calls
// without flags pass Ep::tx_flags / rx_flags.
extern fi_ops_msg msg_ops_default_flags;
extern fi_ops_tagged tagged_ops_default_flags;

// api/libfabric/unsupported.cc: -FI_ENOSYS for every slot softfab does not
// serve, so no table holds a NULL.
extern fi_ops_rma unsupported_rma;
extern fi_ops_atomic unsupported_atomic;
extern fi_ops_collective unsupported_collective;
int NoBind(fid* f, fid* bfid, uint64_t flags);
int NoControl(fid* f, int command, void* arg);
int NoOpsOpen(fid* f, const char* name, uint64_t flags, void** ops,
              void* context);
int NoToStr(const fid* f, char* buf, size_t len);
int NoOpsSet(fid* f, const char* name, uint64_t flags, void* ops,
             void* context);
ssize_t NoCancel(fid* f, void* context);
int NoGetOpt(fid* f, int level, int optname, void* optval, size_t* optlen);
int NoSetOpt(fid* f, int level, int optname, const void* optval, size_t optlen);
int NoTxCtx(fid_ep* sep, int index, fi_tx_attr* attr, fid_ep** ep,
            void* context);
int NoRxCtx(fid_ep* sep, int index, fi_rx_attr* attr, fid_ep** ep,
            void* context);
ssize_t NoSizeLeft(fid_ep* ep);

}  // namespace softfab::libfabric

#endif  // SOFTFAB_API_LIBFABRIC_INTERNAL_PROVIDER_OBJECTS_H_
