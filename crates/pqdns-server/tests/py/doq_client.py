"""An independent DNS-over-QUIC client (RFC 9250) for pqdns-server's tests: aioquic, a QUIC and
TLS 1.3 implementation of its own (classical only: X25519/P-256 key exchange, ECDSA, Ed25519
and RSA certificates).

Usage: doq_client.py ADDR:PORT QNAME [--ca FILE] [--queries N] [--id N]

Opens one QUIC connection (ALPN "doq"), verifying the server's certificate against FILE for
"localhost" with --ca (any certificate otherwise), and sends N queries for QNAME/A, each on its
own stream with message ID 0 (or --id). Prints key=value lines: alpn, and per answer rcode and
answers (of the last one), queries_answered; exit status 1 with error=... on any failure.
"""

import argparse
import asyncio
import ssl
import struct
import sys

from aioquic.asyncio import connect
from aioquic.quic.configuration import QuicConfiguration


def query(qname, msg_id):
    labels = b"".join(
        bytes([len(l)]) + l.encode() for l in qname.rstrip(".").split(".") if l
    )
    header = struct.pack(">HHHHHH", msg_id, 0, 1, 0, 0, 0)
    return header + labels + b"\0" + struct.pack(">HH", 1, 1)


async def run(a):
    host, port = a.addr.rsplit(":", 1)
    config = QuicConfiguration(alpn_protocols=["doq"], is_client=True)
    config.server_name = "localhost"
    if a.ca:
        config.load_verify_locations(a.ca)
    else:
        config.verify_mode = ssl.CERT_NONE
    answered = 0
    async with connect(host, int(port), configuration=config) as client:
        print(f"alpn={client._quic.tls.alpn_negotiated}")
        for _ in range(a.queries):
            reader, writer = await client.create_stream()
            q = query(a.qname, a.id)
            writer.write(struct.pack(">H", len(q)) + q)
            writer.write_eof()
            data = await reader.read(-1)
            (length,) = struct.unpack(">H", data[:2])
            answer = data[2 : 2 + length]
            if len(answer) != length:
                raise EOFError("short answer")
            msg_id, flags, _, ancount = struct.unpack(">HHHH", answer[:8])
            if msg_id != a.id:
                raise ValueError(f"answer ID {msg_id}")
            print(f"rcode={flags & 0xF}")
            print(f"answers={ancount}")
            answered += 1
    print(f"queries_answered={answered}")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("addr")
    p.add_argument("qname")
    p.add_argument("--ca")
    p.add_argument("--queries", type=int, default=1)
    p.add_argument("--id", type=int, default=0)
    a = p.parse_args()
    try:
        asyncio.run(asyncio.wait_for(run(a), 15))
    except Exception as e:  # noqa: BLE001 - any failure is reported the same way
        print(f"error={e!r}")
        sys.exit(1)


if __name__ == "__main__":
    main()
