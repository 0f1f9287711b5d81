#!/usr/bin/env python3
"""SOA poller for benches/fleet/run.sh (stdlib only): asks SERVER for the SOA of every zone in
ZONES (one per line) over UDP, without DO (query ID = the zone's line number, so a late
answer is never taken for another zone's; up to 5 rounds for the unanswered), and prints how many
are served signed by pqdns (NOERROR, serial above 10^9: the template's `serial = "unixtime"`,
the primary's serials are small) and how many are REFUSED.

    poll.py HOST PORT ZONES_FILE        -> "signed refused other"
"""
import socket
import struct
import sys
import time


def query(qid, name):
    wire = b"".join(bytes([len(l)]) + l.encode() for l in name.rstrip(".").split(".")) + b"\0"
    return struct.pack("!HHHHHH", qid, 0, 1, 0, 0, 0) + wire + struct.pack("!HH", 6, 1)


def soa_serial(resp, qlen):
    """Serial of the first answer (an SOA) of resp, whose question ends at qlen."""
    pos = qlen
    # owner: a compression pointer or labels
    while True:
        b = resp[pos]
        if b >= 0xC0:
            pos += 2
            break
        if b == 0:
            pos += 1
            break
        pos += 1 + b
    rtype, _, _, rdlen = struct.unpack("!HHIH", resp[pos:pos + 10])
    if rtype != 6:
        return None
    rdata = resp[pos + 10:pos + 10 + rdlen]
    p = 0
    for _ in range(2):  # MNAME, RNAME
        while True:
            b = rdata[p]
            if b >= 0xC0:
                p += 2
                break
            if b == 0:
                p += 1
                break
            p += 1 + b
    return struct.unpack("!I", rdata[p:p + 4])[0]


def main():
    host, port, zones_file = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    zones = [z.strip() for z in open(zones_file) if z.strip()]
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.settimeout(0.5)
    result = {}
    for attempt in range(5):
        pending = {}
        for qid, z in enumerate(zones):
            if z in result:
                continue
            q = query(qid, z)
            pending[qid] = (z, len(q))
            sock.sendto(q, (host, port))
            if len(pending) % 64 == 0:
                time.sleep(0.002)
        deadline = time.time() + 2.0
        while pending and time.time() < deadline:
            try:
                resp, _ = sock.recvfrom(4096)
            except socket.timeout:
                break
            qid, flags, _, an = struct.unpack("!HHHH", resp[:8])
            if qid not in pending:
                continue  # a late answer of an earlier attempt: already counted
            z, qlen = pending.pop(qid)
            rcode = flags & 0xF
            if rcode == 5:
                result[z] = "refused"
            elif rcode == 0 and an > 0 and (soa_serial(resp, qlen) or 0) > 10**9:
                result[z] = "signed"
            else:
                result[z] = "other"
    counts = {"signed": 0, "refused": 0, "other": 0}
    for z in zones:
        counts[result.get(z, "other")] += 1
    print(counts["signed"], counts["refused"], counts["other"])


if __name__ == "__main__":
    main()
