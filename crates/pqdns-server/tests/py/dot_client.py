"""An independent DNS-over-TLS client (RFC 7858) for pqdns-server's tests: pyOpenSSL over the
OpenSSL that the `cryptography` wheel bundles (4.x), which negotiates X25519MLKEM768 and
verifies ML-DSA certificates and handshake signatures (FIPS 204, TLS schemes 0x0904-0x0906);
Debian 12's OpenSSL 3.0 and Go's crypto/tls do neither ML-DSA.

Usage: dot_client.py ADDR:PORT QNAME [--ca FILE] [--sigalgs LIST] [--p256-only]

--ca verifies the server's certificate against FILE for the name "localhost" (any certificate
is accepted without it); --sigalgs restricts the signature algorithms the client accepts
(OpenSSL names, e.g. "ECDSA+SHA256:ed25519" for a classical-only client); --p256-only offers
only the classical group P-256. Prints key=value lines: group (negotiated named group),
cert_key (the key type of the server's certificate), rcode and answers of the A query; exit
status 1 with error=... on any failure.
"""

import argparse
import random
import socket
import struct
import sys
import warnings

from OpenSSL import SSL, crypto
from OpenSSL._util import lib


def query(qname):
    labels = b"".join(
        bytes([len(l)]) + l.encode() for l in qname.rstrip(".").split(".") if l
    )
    header = struct.pack(">HHHHHH", random.getrandbits(16), 0, 1, 0, 0, 0)
    return header + labels + b"\0" + struct.pack(">HH", 1, 1)


def recv_exact(conn, n):
    data = b""
    while len(data) < n:
        chunk = conn.recv(n - len(data))
        if not chunk:
            raise EOFError("connection closed")
        data += chunk
    return data


def main():
    p = argparse.ArgumentParser()
    p.add_argument("addr")
    p.add_argument("qname")
    p.add_argument("--ca")
    p.add_argument("--sigalgs")
    p.add_argument("--p256-only", action="store_true")
    a = p.parse_args()
    host, port = a.addr.rsplit(":", 1)

    ctx = SSL.Context(SSL.TLS_CLIENT_METHOD)
    ctx.set_min_proto_version(SSL.TLS1_3_VERSION)
    ctx.set_alpn_protos([b"dot"])
    if a.ca:
        ctx.load_verify_locations(a.ca)
        ctx.set_verify(SSL.VERIFY_PEER, lambda *args: args[-1])
    if a.sigalgs:
        if lib.SSL_CTX_set1_sigalgs_list(ctx._context, a.sigalgs.encode()) != 1:
            raise SystemExit("error=bad --sigalgs")
    if a.p256_only:
        # SSL_CTX_set_tmp_ecdh sets the group list to this one curve.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            ctx.set_tmp_ecdh(crypto.get_elliptic_curve("prime256v1"))

    sock = socket.create_connection((host, int(port)), timeout=10)
    # pyOpenSSL needs a blocking socket; the timeout(1) wrapper of the tests bounds the run.
    sock.setblocking(True)
    conn = SSL.Connection(ctx, sock)
    conn.set_tlsext_host_name(b"localhost")
    if a.ca:
        lib.X509_VERIFY_PARAM_set1_host(
            lib.SSL_get0_param(conn._ssl), b"localhost", len(b"localhost")
        )
    conn.set_connect_state()
    try:
        conn.do_handshake()
        cert = conn.get_peer_certificate().to_cryptography()
        print(f"group={conn.get_group_name()}")
        print(f"cert_key={type(cert.public_key()).__name__}")
        q = query(a.qname)
        conn.sendall(struct.pack(">H", len(q)) + q)
        (length,) = struct.unpack(">H", recv_exact(conn, 2))
        answer = recv_exact(conn, length)
        flags, _, ancount = struct.unpack(">HHH", answer[2:8])
        print(f"rcode={flags & 0xF}")
        print(f"answers={ancount}")
    except (SSL.Error, OSError, EOFError) as e:
        print(f"error={e!r}")
        sys.exit(1)


if __name__ == "__main__":
    main()
