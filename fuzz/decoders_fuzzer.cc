// Fuzz target: the wire decoders on their own (message header, CM datagram,
// endpoint name) and names as the API takes them (sf_av_insert, sf_av_lookup,
// sf_av_remove), against a model of the address vector.
//
// Input: a selector byte, then the bytes to decode. Checks, beyond "no
// crash": whatever a decoder accepts re-encodes to the same bytes; a CM
// datagram's prefix is read whenever it starts with the marker, and a whole
// message is rejected when too short, of another version, of an unknown type,
// with an MTU that is no IB MTU or with private data past its end; the address
// vector hands out indices lowest-free-first, looks each name up again byte for
// byte and finds every live name by its LID and QP number.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <vector>

#include "api/softfab/fabric.h"
#include "core/address_vector.h"
#include "core/wire.h"
#include "fuzz/fuzz_check.h"

namespace {

namespace wire = ::softfab::wire;

void Header(const uint8_t* in, size_t n) {
  wire::Header h;
  if (!wire::Decode(in, n, &h)) return;
  FUZZ_CHECK(n >= wire::kHeaderBytes);
  uint8_t out[wire::kHeaderBytes];
  wire::Encode(h, out);
  FUZZ_CHECK(std::memcmp(out, in, wire::kHeaderBytes) == 0);
}

void Cm(const uint8_t* in, size_t n) {
  // The prefix every version shares: read whenever the marker is there.
  wire::CmPrefix prefix;
  const bool has_prefix = wire::DecodeCmPrefix(in, n, &prefix);
  FUZZ_CHECK(has_prefix ==
             (n >= wire::kCmPrefixBytes && in[0] == wire::kCmMarker));
  if (has_prefix) {
    uint8_t out[wire::kCmPrefixBytes];
    wire::EncodeCmPrefix(prefix.type, prefix.from, out);
    FUZZ_CHECK(std::memcmp(out, in, 1) == 0 && out[2] == in[2] &&
               std::memcmp(out + 3, in + 3, 18) == 0 &&
               std::memcmp(out + 3 + 20, in + 3 + 20, 8) == 0);
  }
  wire::CmMessage m;
  const bool ok = wire::DecodeCm(in, n, &m);
  // A whole message: this version, a type below kVersionRefused (which is a
  // prefix alone).
  const bool known_type =
      has_prefix && in[1] == wire::kCmVersion &&
      in[2] >= static_cast<uint8_t>(wire::CmType::kRequest) &&
      in[2] < static_cast<uint8_t>(wire::CmType::kVersionRefused);
  const bool data_fits = n >= wire::kCmBytes &&
                         in[wire::kCmBytes - 1] <= wire::kCmDataMax &&
                         n >= wire::kCmBytes + in[wire::kCmBytes - 1];
  const bool mtu_known = n > wire::kCmPrefixBytes &&
                         in[wire::kCmPrefixBytes] >= 1 &&
                         in[wire::kCmPrefixBytes] <= 5;
  FUZZ_CHECK(ok == (known_type && data_fits && mtu_known));
  if (!ok) return;
  uint8_t out[wire::kCmMaxBytes];
  wire::EncodeCm(m, out);
  FUZZ_CHECK(wire::CmSize(m) <= n);
  // The name's two padding bytes (18, 19) go out as zeros.
  uint8_t expect[wire::kCmMaxBytes];
  std::memcpy(expect, in, wire::CmSize(m));
  expect[3 + 18] = expect[3 + 19] = 0;
  FUZZ_CHECK(std::memcmp(out, expect, wire::CmSize(m)) == 0);
}

// Names through the public calls, then the core's vector against a model.
void Names(const uint8_t* in, size_t n) {
  static sf_fabric* fabric = [] {
    sf_fabric_attr attr{};
    attr.backend = SF_BACKEND_SIM;
    attr.sim_nodes = 1;
    attr.sim_seed = 1;
    sf_fabric* f = nullptr;
    FUZZ_CHECK(sf_fabric_open(&attr, &f, nullptr) == 0);
    return f;
  }();
  static sf_domain* domain = [] {
    sf_domain* d = nullptr;
    FUZZ_CHECK(sf_domain_open(fabric, 0, &d, nullptr) == 0);
    return d;
  }();
  if (n < 1) return;
  // A small vector, so that it fills up.
  sf_av_attr attr{};
  attr.count = 1 + in[0] % 8;
  ++in;
  --n;
  sf_av* av = nullptr;
  FUZZ_CHECK(sf_av_open(domain, &attr, &av, nullptr) == 0);
  const size_t count = n / SF_NAME_BYTES;
  std::vector<sf_addr_t> addrs(count + 1, 0);
  const int inserted = sf_av_insert(av, in, count, addrs.data(), 0, nullptr);
  FUZZ_CHECK(inserted >= 0 && static_cast<size_t>(inserted) <= count);
  int ok = 0;
  for (size_t i = 0; i < count; ++i) {
    if (addrs[i] == SF_ADDR_NOTAVAIL) continue;
    ++ok;
    FUZZ_CHECK(addrs[i] < attr.count);
    uint8_t back[SF_NAME_BYTES];
    size_t len = sizeof back;
    FUZZ_CHECK(sf_av_lookup(av, addrs[i], back, &len) == 0);
    FUZZ_CHECK(len == SF_NAME_BYTES);
    uint8_t expect[SF_NAME_BYTES];
    std::memcpy(expect, in + i * SF_NAME_BYTES, SF_NAME_BYTES);
    expect[18] = expect[19] = 0;
    FUZZ_CHECK(std::memcmp(back, expect, SF_NAME_BYTES) == 0);
  }
  FUZZ_CHECK(ok == inserted);
  // Removing an index twice in one call is refused as a whole.
  if (count > 0 && addrs[0] != SF_ADDR_NOTAVAIL) {
    sf_addr_t twice[2] = {addrs[0], attr.count + 5};
    FUZZ_CHECK(sf_av_remove(av, twice, 2, 0) == -SF_EINVAL);
    size_t len = SF_NAME_BYTES;
    uint8_t back[SF_NAME_BYTES];
    FUZZ_CHECK(sf_av_lookup(av, addrs[0], back, &len) == 0);
  }
  FUZZ_CHECK(sf_close(&av->fid) == 0);

  // The core's vector: each name inserts, or (odd first byte) removes the
  // index its second byte names, checked against a model.
  softfab::core::AddressVector core_av(attr.count);
  std::map<uint64_t, wire::Name> model;
  for (size_t i = 0; i < count; ++i) {
    const uint8_t* p = in + i * SF_NAME_BYTES;
    if (p[0] & 1) {
      const uint64_t index = p[1] % (attr.count + 1);
      const bool live = model.count(index) != 0;
      FUZZ_CHECK(core_av.Remove(index).ok() == live);
      model.erase(index);
    } else {
      wire::Name name;
      wire::DecodeName(p, &name);
      std::optional<uint64_t> had;
      for (const auto& [index, m] : model) {
        if (m == name) had = index;
      }
      auto index = core_av.Insert(name);
      if (had) {
        FUZZ_CHECK(index.ok() && *index == *had);
      } else if (model.size() >= attr.count) {
        FUZZ_CHECK(!index.ok());
      } else {
        uint64_t lowest = 0;
        while (model.count(lowest)) ++lowest;
        FUZZ_CHECK(index.ok() && *index == lowest);
        model[lowest] = name;
      }
    }
    FUZZ_CHECK(core_av.count() == model.size());
    for (const auto& [index, m] : model) {
      FUZZ_CHECK(core_av.Lookup(index) == m);
      FUZZ_CHECK(core_av.Find(m) == index);
      const auto by_qpn = core_av.FindByLidQpn(m.lid, m.cm_qpn);
      FUZZ_CHECK(by_qpn.has_value());
      FUZZ_CHECK(model.count(*by_qpn) != 0);
      FUZZ_CHECK(model[*by_qpn].lid == m.lid &&
                 model[*by_qpn].cm_qpn == m.cm_qpn);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  switch (data[0] % 3) {
    case 0:
      Header(data + 1, size - 1);
      break;
    case 1:
      Cm(data + 1, size - 1);
      break;
    case 2:
      Names(data + 1, size - 1);
      break;
  }
  return 0;
}
