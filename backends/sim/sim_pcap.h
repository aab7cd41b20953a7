// Packet capture of the simulated wire: every packet a SimFabric's links
// deliver, written to a pcap file as a RoCEv2 frame (Ethernet, IPv4, UDP to
// port 4791, BTH, DETH / RETH / AETH / ImmDt as the opcode needs, payload,
// ICRC) that Wireshark and tshark decode, stamped with the virtual time.
//
// What the capture shows, and where it departs from a real port:
// - A packet is written when it arrives at its destination port (so its
//   timestamp is its arrival time): one frame per kPacketArrive trace record,
//   in the same order. Packets a fault dropped on the way never arrive and are
//   not written; a corrupted packet (PacketFaultKind::kCorrupt) is written with
//   a wrong ICRC, which is why the receiver drops it.
// - Addresses come from node ids (internal/rocev2_frame.h): node n is IPv4
//   10.x.y.z and MAC 02:00:0a:x:y:z with x.y.z the 24 bits of n, as the GID
//   the simulated port reports. The UDP source port is 0xc000 | the sending
//   QP number's low 14 bits.
// - Payload bytes are those the simulator delivers: read, as the simulator
//   reads them, from the requester's (SEND, WRITE) or responder's (READ
//   response) registered memory at arrival; zeros where the WR no longer
//   exists (the simulator drops such a packet).
// - The model keeps no message sequence number: AETH MSN is 0. ACKs carry
//   credit code 0x1f (no end-to-end credits). A UD packet's BTH PSN is the
//   WR's index on its send queue (24 bits); the simulator gives UD no PSN.
//
// The capture changes nothing the fabric does: a run with a capture open has
// the same events, trace and digest as the same run without.
#ifndef SOFTFAB_BACKENDS_SIM_SIM_PCAP_H_
#define SOFTFAB_BACKENDS_SIM_SIM_PCAP_H_

#include <cstdint>
#include <memory>
#include <string>

#include "backends/sim/sim_fabric.h"
#include "transport/status.h"

namespace softfab::sim {

namespace internal {
class PcapTap;
}  // namespace internal

class PcapCapture {
 public:
  // Creates (truncates) the pcap file at `path` (nanosecond timestamps,
  // Ethernet link type) and attaches to `fabric`, which must be a fabric from
  // CreateSimFabric, outlive the capture, and have no other capture attached.
  // On failure returns the error and, if `error` is not null, sets it to a
  // sentence naming the path and the cause; nothing is attached.
  // Single-threaded, as the fabric.
  [[nodiscard]] static StatusOr<std::unique_ptr<PcapCapture>> Open(
      SimFabric* fabric, const std::string& path, std::string* error);

  // Close() unless already closed (a write error is then lost: call Close()
  // to see it).
  ~PcapCapture();
  PcapCapture(const PcapCapture&) = delete;
  PcapCapture& operator=(const PcapCapture&) = delete;

  // Detaches from the fabric, flushes and closes the file. EIO if any write
  // failed. Later calls return OK and do nothing.
  [[nodiscard]] Status Close();

  // Frames written so far.
  uint64_t packets() const;

 private:
  explicit PcapCapture(std::unique_ptr<internal::PcapTap> tap);
  std::unique_ptr<internal::PcapTap> tap_;
};

}  // namespace softfab::sim

#endif  // SOFTFAB_BACKENDS_SIM_SIM_PCAP_H_
