// Command doqclient is an independent DNS-over-QUIC peer (RFC 9250) for pqdns-server's tests:
// quic-go over Go's crypto/tls, which offers the hybrid X25519MLKEM768 group by default
// (Go 1.24+); no Debian 12 QUIC client does (kdig +quic and aioquic are classical-only).
//
// It opens one QUIC connection with ALPN "doq", sends -queries queries on their own
// bidirectional streams (2-byte length + message with ID 0, RFC 9250 §4.2), and prints
// key=value lines: the negotiated group (tls.ConnectionState.CurveID), the ALPN, the answered
// query count and the last answer's RCODE and answer count. With -classical it offers only
// X25519. Without -ca it accepts any certificate; with -ca FILE it verifies the server's
// certificate against FILE for the host of -addr. Exit status 1 on any failure.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"time"

	"github.com/quic-go/quic-go"
)

func query(name string, qtype uint16) []byte {
	msg := []byte{0, 0, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0}
	for _, label := range strings.Split(strings.TrimSuffix(name, "."), ".") {
		msg = append(msg, byte(len(label)))
		msg = append(msg, label...)
	}
	msg = append(msg, 0)
	msg = binary.BigEndian.AppendUint16(msg, qtype)
	return binary.BigEndian.AppendUint16(msg, 1)
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "error: "+format+"\n", args...)
	os.Exit(1)
}

// exchange sends q on a new stream of conn and returns the answer message.
func exchange(ctx context.Context, conn *quic.Conn, q []byte) []byte {
	stream, err := conn.OpenStreamSync(ctx)
	if err != nil {
		fail("open stream: %v", err)
	}
	frame := binary.BigEndian.AppendUint16(nil, uint16(len(q)))
	if _, err := stream.Write(append(frame, q...)); err != nil {
		fail("write: %v", err)
	}
	// Close finishes the sending side only (the query is complete, RFC 9250 §4.2).
	if err := stream.Close(); err != nil {
		fail("finish: %v", err)
	}
	resp, err := io.ReadAll(io.LimitReader(stream, 2+65535))
	if err != nil {
		fail("read: %v", err)
	}
	if len(resp) < 14 || int(binary.BigEndian.Uint16(resp)) != len(resp)-2 {
		fail("stream is not one length-prefixed message (%d bytes)", len(resp))
	}
	return resp[2:]
}

func main() {
	addr := flag.String("addr", "127.0.0.1:8853", "server address (UDP)")
	name := flag.String("name", "www.pqdns.test.", "query name")
	queries := flag.Int("queries", 1, "queries, each on its own stream of one connection")
	classical := flag.Bool("classical", false, "offer only X25519")
	caFile := flag.String("ca", "", "verify the server certificate against this PEM file")
	flag.Parse()

	conf := &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"doq"}}
	if *caFile != "" {
		pem, err := os.ReadFile(*caFile)
		if err != nil {
			fail("%v", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			fail("%s: no certificate", *caFile)
		}
		host, _, err := net.SplitHostPort(*addr)
		if err != nil {
			fail("%v", err)
		}
		conf.InsecureSkipVerify = false
		conf.RootCAs = pool
		conf.ServerName = host
	}
	if *classical {
		conf.CurvePreferences = []tls.CurveID{tls.X25519}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := quic.DialAddr(ctx, *addr, conf, &quic.Config{HandshakeIdleTimeout: 5 * time.Second})
	if err != nil {
		fail("handshake: %v", err)
	}
	st := conn.ConnectionState().TLS
	fmt.Printf("curve=%s\nalpn=%s\n", st.CurveID, st.NegotiatedProtocol)
	var resp []byte
	for i := 0; i < *queries; i++ {
		resp = exchange(ctx, conn, query(*name, 1))
	}
	fmt.Printf("queries_answered=%d\nrcode=%d\nanswers=%d\n",
		*queries, resp[3]&0x0f, binary.BigEndian.Uint16(resp[6:8]))
	conn.CloseWithError(0, "")
}
