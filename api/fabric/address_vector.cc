// Address vectors: peer names (SF_NAME_BYTES each) in, sf_addr_t indices out.
#include "core/address_vector.h"

#include <cerrno>
#include <memory>

#include "api/fabric/internal/fabric_objects.h"
#include "api/softfab/fabric.h"
#include "core/wire.h"

namespace softfab::fabric_internal {

// The sf_* calls have C linkage, so defined inside the namespace they are
// still the global functions api/softfab/fabric.h declares.
extern "C" {

int sf_av_open(sf_domain* pub, const sf_av_attr* attr, sf_av** out,
               void* context) {
  Domain* d = AsDomain(pub);
  if (d == nullptr || out == nullptr) {
    return Fail(EINVAL, "domain and av must be valid");
  }
  const size_t count = attr && attr->count ? attr->count : 1024;
  if (attr && attr->flags) return Fail(EINVAL, "no AV flags are supported");
  auto* a = NewObject<Av>(SF_CLASS_AV, context, &d->children);
  a->domain = d;
  a->av = std::make_unique<core::AddressVector>(count);
  *out = a;
  return 0;
}

int sf_av_insert(sf_av* pub, const void* addr, size_t count, sf_addr_t* fi_addr,
                 uint64_t flags, void* context) {
  (void)context;
  Av* a = AsAv(pub);
  if (a == nullptr) return Fail(EINVAL, "not an address vector");
  if ((addr == nullptr && count > 0) || flags != 0) {
    return Fail(EINVAL, "need names to insert; flags must be 0");
  }
  int inserted = 0;
  for (size_t i = 0; i < count; ++i) {
    const uint8_t* raw = static_cast<const uint8_t*>(addr) + i * SF_NAME_BYTES;
    softfab::wire::Name name;
    softfab::wire::DecodeName(raw, &name);
    // fi_av(3): a name that fails to insert gets FI_ADDR_NOTAVAIL. No
    // endpoint has a name with its reserved bytes set or a QP number beyond
    // the 24 bits of the IB spec's QPN.
    ::softfab::StatusOr<uint64_t> index =
        raw[18] != 0 || raw[19] != 0 || name.cm_qpn > 0xFFFFFF
            ? ::softfab::InvalidArgument("not an endpoint's name (malformed)")
            : a->av->Insert(name);
    if (fi_addr) fi_addr[i] = index.ok() ? *index : SF_ADDR_NOTAVAIL;
    if (index.ok()) {
      ++inserted;
    } else {
      last_error = index.status().message();
    }
  }
  return inserted;
}

int sf_av_remove(sf_av* pub, sf_addr_t* fi_addr, size_t count, uint64_t flags) {
  Av* a = AsAv(pub);
  if (a == nullptr || (fi_addr == nullptr && count > 0) || flags != 0) {
    return Fail(EINVAL, "bad argument");
  }
  // All or nothing: check every index first.
  for (size_t i = 0; i < count; ++i) {
    if (!a->av->Lookup(fi_addr[i])) {
      return Fail(EINVAL, "an address to remove is not in the vector");
    }
  }
  for (size_t i = 0; i < count; ++i) (void)a->av->Remove(fi_addr[i]);
  return 0;
}

int sf_av_lookup(sf_av* pub, sf_addr_t fi_addr, void* addr, size_t* addrlen) {
  Av* a = AsAv(pub);
  if (a == nullptr || addrlen == nullptr) return Fail(EINVAL, "bad argument");
  auto name = a->av->Lookup(fi_addr);
  // fi_av(3): an index never set, removed, or past the vector is invalid.
  if (!name) return Fail(EINVAL, "no address at that index");
  const size_t room = *addrlen;
  *addrlen = SF_NAME_BYTES;
  if (addr == nullptr || room < SF_NAME_BYTES) {
    return Fail(SF_ETOOSMALL, "address buffer too small (size written back)");
  }
  softfab::wire::EncodeName(*name, static_cast<uint8_t*>(addr));
  return 0;
}

}  // extern "C"

}  // namespace softfab::fabric_internal
