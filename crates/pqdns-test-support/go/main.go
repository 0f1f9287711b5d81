// Command tlsclient is an independent TLS peer for pqdns-server's tests: Go's crypto/tls offers
// the hybrid X25519MLKEM768 group by default (Go 1.24+), which no Debian 12 client does.
//
// It connects over DoT (RFC 7858) or DoH (RFC 8484), sends one query and prints key=value
// lines: the negotiated group (tls.ConnectionState.CurveID), the TLS version, and the DNS or
// HTTP result. With -classical it offers only X25519. Without -ca it accepts any certificate;
// with -ca FILE it verifies the server's certificate against FILE for -servername (default:
// the host of -addr, an IP address checked against the certificate's IP names). Exit status 1
// on any failure.
package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"
)

func query(name string, qtype uint16) []byte {
	msg := []byte{0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0}
	for _, label := range strings.Split(strings.TrimSuffix(name, "."), ".") {
		msg = append(msg, byte(len(label)))
		msg = append(msg, label...)
	}
	msg = append(msg, 0)
	msg = binary.BigEndian.AppendUint16(msg, qtype)
	return binary.BigEndian.AppendUint16(msg, 1)
}

func printDNS(resp []byte) {
	if len(resp) < 12 {
		fail("short DNS response")
	}
	fmt.Printf("rcode=%d\nanswers=%d\n", resp[3]&0x0f, binary.BigEndian.Uint16(resp[6:8]))
}

func printTLS(st tls.ConnectionState) {
	fmt.Printf("curve=%s\nversion=%s\nalpn=%s\n", st.CurveID, tls.VersionName(st.Version), st.NegotiatedProtocol)
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "error: "+format+"\n", args...)
	os.Exit(1)
}

func main() {
	addr := flag.String("addr", "127.0.0.1:8853", "server address")
	mode := flag.String("mode", "dot", "dot | doh-post | doh-get | doh-badtype | doh-big | doh-badbase64")
	name := flag.String("name", "www.pqdns.test.", "query name")
	path := flag.String("path", "/dns-query", "DoH path")
	classical := flag.Bool("classical", false, "offer only X25519")
	caFile := flag.String("ca", "", "verify the server certificate against this PEM file")
	serverName := flag.String("servername", "", "name to verify with -ca (default: the host of -addr)")
	flag.Parse()

	conf := &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}
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
		if *serverName != "" {
			host = *serverName
		}
		conf.InsecureSkipVerify = false
		conf.RootCAs = pool
		conf.ServerName = host
	}
	if *classical {
		conf.CurvePreferences = []tls.CurveID{tls.X25519}
	}
	q := query(*name, 1)

	if *mode == "dot" {
		conf.NextProtos = []string{"dot"}
		dialer := &net.Dialer{Timeout: 10 * time.Second}
		conn, err := tls.DialWithDialer(dialer, "tcp", *addr, conf)
		if err != nil {
			fail("handshake: %v", err)
		}
		defer conn.Close()
		conn.SetDeadline(time.Now().Add(10 * time.Second))
		printTLS(conn.ConnectionState())
		frame := binary.BigEndian.AppendUint16(nil, uint16(len(q)))
		if _, err := conn.Write(append(frame, q...)); err != nil {
			fail("write: %v", err)
		}
		var lenBuf [2]byte
		if _, err := io.ReadFull(conn, lenBuf[:]); err != nil {
			fail("read length: %v", err)
		}
		resp := make([]byte, binary.BigEndian.Uint16(lenBuf[:]))
		if _, err := io.ReadFull(conn, resp); err != nil {
			fail("read message: %v", err)
		}
		printDNS(resp)
		return
	}

	client := &http.Client{
		Timeout:   10 * time.Second,
		Transport: &http.Transport{TLSClientConfig: conf, ForceAttemptHTTP2: true},
	}
	url := "https://" + *addr + *path
	var req *http.Request
	var err error
	switch *mode {
	case "doh-post":
		req, err = http.NewRequest("POST", url, bytes.NewReader(q))
		req.Header.Set("Content-Type", "application/dns-message")
	case "doh-get":
		req, err = http.NewRequest("GET", url+"?dns="+base64.RawURLEncoding.EncodeToString(q), nil)
	case "doh-badtype":
		req, err = http.NewRequest("POST", url, bytes.NewReader(q))
		req.Header.Set("Content-Type", "text/plain")
	case "doh-big":
		req, err = http.NewRequest("POST", url, bytes.NewReader(make([]byte, 70000)))
		req.Header.Set("Content-Type", "application/dns-message")
	case "doh-badbase64":
		req, err = http.NewRequest("GET", url+"?dns=!!!not-base64!!!", nil)
	default:
		fail("unknown mode %q", *mode)
	}
	if err != nil {
		fail("request: %v", err)
	}
	req.Header.Set("Accept", "application/dns-message")
	resp, err := client.Do(req)
	if err != nil {
		fail("%s: %v", *mode, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 70000))
	if err != nil {
		fail("body: %v", err)
	}
	printTLS(*resp.TLS)
	fmt.Printf("status=%d\nproto=%s\ncontent-type=%s\ncache-control=%s\n",
		resp.StatusCode, resp.Proto, resp.Header.Get("Content-Type"), resp.Header.Get("Cache-Control"))
	if resp.StatusCode == 200 {
		printDNS(body)
	}
}
