#!/usr/bin/env python3
"""Checks a RoCEv2 capture of the simulator against its event trace.

  check_capture.py TRACE PCAP [--bad-icrc-max N]

TRACE is the file `softfab replay --trace` writes ("time_ns seq kind node qp psn
opcode" per line; kind 0 = a packet arriving), PCAP the capture `--pcap` writes.
tshark (Debian package tshark) decodes the capture; frame i must be the trace's
i-th arrival: same virtual time, destination node (IPv4 10.x.y.z), a BTH opcode
of the trace's packet kind, destination QP, and PSN (for UD the trace's PSN
field holds the Q_Key, checked against the DETH). No frame may be malformed or
carry an expert error in the layers the simulator writes (see OWN_LAYERS). ICRCs are recomputed here with zlib's CRC-32 (an
implementation independent of the simulator's): at most N may be wrong (the
packets a fault corrupted; default 0). Prints one summary line; exit 1 on any
mismatch, 2 on usage.
"""
import os
import struct
import subprocess
import sys
import tempfile
import zlib

KIND_ARRIVE = 0
# The simulator's packet kinds (trace "opcode") and the BTH opcodes they may use.
OPCODES = {
    0: range(0x00, 0x06),  # SEND first/middle/last(/imm)/only(/imm)
    1: range(0x06, 0x0C),  # RDMA WRITE
    2: range(0x0C, 0x0D),  # RDMA READ request
    3: range(0x0D, 0x11),  # RDMA READ response
    4: range(0x11, 0x12),  # ACK / NAK
    5: range(0x64, 0x66),  # UD SEND only(/imm)
}
FIELDS = ["frame.time_epoch", "ip.dst", "udp.dstport", "infiniband.bth.opcode",
          "infiniband.bth.destqp", "infiniband.bth.psn", "infiniband.deth.q_key",
          "infiniband.invariant.crc", "_ws.malformed", "_ws.expert.severity"]
EXPERT_ERROR = 0x00800000
# The layers the simulator writes. tshark also guesses at payloads: an RDMA WRITE
# of 8 bytes 00 60 00 00 ... "appears to be EtherType encapsulated" (Wireshark's
# IPoIB guess) and a LAPB or DEC dissector then finds it malformed. Such a report
# names the guessed protocol and comes after the InfiniBand layer has decoded
# through the ICRC: it says nothing about the frame and is not counted.
OWN_LAYERS = ("Ethernet", "IPv4", "IP", "UDP", "RRoCE", "InfiniBand", "Frame")


def malformed_in_own_layers(got):
    text = got["_ws.malformed"]
    severity = int(got["_ws.expert.severity"] or "0", 0)
    if not text and severity < EXPERT_ERROR:
        return False
    if not got["infiniband.invariant.crc"]:
        return True  # the InfiniBand layer did not decode to its end
    guessed = text.rpartition(":")[2].strip(" ]")
    return not text or guessed in OWN_LAYERS


def read_trace(path):
    arrivals = []
    with open(path) as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            t, _seq, kind, node, qp, psn, op = (int(x) for x in line.split())
            if kind == KIND_ARRIVE:
                arrivals.append((t, node, qp, psn, op))
    return arrivals


def read_pcap(path):
    """(time_ns, frame bytes) per record of a little-endian nanosecond pcap."""
    with open(path, "rb") as f:
        data = f.read()
    magic, _, _, _, _, _, link = struct.unpack_from("<IHHiIII", data, 0)
    if magic != 0xA1B23C4D or link != 1:
        raise ValueError(f"{path}: not a nanosecond Ethernet pcap")
    frames, at = [], 24
    while at + 16 <= len(data):
        sec, nsec, incl, _orig = struct.unpack_from("<IIII", data, at)
        frames.append((sec * 10**9 + nsec, data[at + 16:at + 16 + incl]))
        at += 16 + incl
    return frames


def icrc_ok(frame):
    """The RoCEv2 annex's ICRC: CRC-32 over 8 bytes of ones and the IPv4 packet
    with TOS, TTL, IP checksum, UDP checksum and the BTH byte after the P_Key as
    ones; sent least significant byte first."""
    ip = bytearray(frame[14:-4])
    ip[1] = ip[8] = ip[10] = ip[11] = 0xFF
    ip[26] = ip[27] = 0xFF
    ip[28 + 4] = 0xFF
    want = zlib.crc32(b"\xff" * 8 + bytes(ip)) & 0xFFFFFFFF
    return struct.unpack("<I", frame[-4:])[0] == want


def tshark_rows(pcap):
    cmd = ["tshark", "-n", "-r", pcap, "--disable-protocol", "rpcordma",
           "-T", "fields", "-E", "occurrence=f"]
    for field in FIELDS:
        cmd += ["-e", field]
    # tshark wants a writable profile folder; the RPC-over-RDMA heuristic is off
    # because it throws on an empty SEND (Wireshark 4.0) and payloads are not RPC.
    env = dict(os.environ, HOME=tempfile.mkdtemp())
    out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True)
    return [line.split("\t") for line in out.stdout.splitlines()]


def main(argv):
    args = argv[1:]
    bad_max = 0
    if "--bad-icrc-max" in args:
        i = args.index("--bad-icrc-max")
        bad_max = int(args[i + 1])
        del args[i:i + 2]
    if len(args) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    trace, frames = read_trace(args[0]), read_pcap(args[1])
    rows = tshark_rows(args[1])
    errors = []
    if not (len(trace) == len(frames) == len(rows)):
        errors.append(f"{len(trace)} arrivals in the trace, {len(frames)} frames in "
                      f"the file, {len(rows)} decoded by tshark")
    bad_icrc = 0
    for i, ((t, node, qp, psn, op), (ts, frame), row) in enumerate(
            zip(trace, frames, rows), start=1):
        row += [""] * (len(FIELDS) - len(row))
        got = dict(zip(FIELDS, row))
        sec, _, frac = got["frame.time_epoch"].partition(".")
        want_ip = f"10.{node >> 16 & 255}.{node >> 8 & 255}.{node & 255}"
        bth = int(got["infiniband.bth.opcode"] or "-1", 0)
        checks = [
            ("time", ts, t),
            ("tshark time", int(sec) * 10**9 + int(frac.ljust(9, "0")[:9]), t),
            ("ip.dst", got["ip.dst"], want_ip),
            ("udp port", got["udp.dstport"], "4791"),
            ("opcode fits", bth in OPCODES.get(op, ()), True),
            ("dest QP", int(got["infiniband.bth.destqp"] or "-1", 0), qp),
            ("PSN" if op != 5 else "Q_Key",
             int(got["infiniband.bth.psn" if op != 5 else "infiniband.deth.q_key"]
                 or "-1", 0), psn),
            ("malformed or expert error",
             (got["_ws.malformed"], got["_ws.expert.severity"])
             if malformed_in_own_layers(got) else None, None),
        ]
        for name, value, want in checks:
            if value != want:
                errors.append(f"frame {i} (trace kind {op}, BTH opcode {bth:#x}): "
                              f"{name} {value!r}, expected {want!r}")
        if not icrc_ok(frame):
            bad_icrc += 1
    if bad_icrc > bad_max:
        errors.append(f"{bad_icrc} frames with a wrong ICRC (at most {bad_max} allowed)")
    for e in errors[:20]:
        print(e)
    print(f"check_capture: {len(frames)} frames against {len(trace)} trace arrivals, "
          f"{bad_icrc} wrong ICRCs: {'FAIL' if errors else 'ok'}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
