// tlsload: a stdlib-only load client for the pqdns serving benchmark (benches/serving/run.sh).
//
//	tlsload handshake -addr 127.0.0.1:30853 -ca cert.pem -curve X25519MLKEM768 -c 8 -d 10s
//	    Opens DoT connections (RFC 7858, ALPN "dot") in a loop for a fixed duration with c
//	    workers: full TLS 1.3 handshake restricted to one key exchange group (no session
//	    resumption), one DNS query (DO=1) and its answer, close_notify, close. Prints one
//	    key=value line.
//	tlsload sizes -addr 127.0.0.1:30053 -f queries.txt -n 400
//	    Sends each of the first n queries of a dnsperf query file once over UDP (EDNS 4096,
//	    DO=1, RD=1, like dnsperf -D) and once over TCP; prints the TC rate over UDP and the
//	    mean response sizes.
//
// All traffic goes to the address given (the benchmark uses 127.0.0.1 only); every loop is
// bounded by a duration or a count.
package main

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

var qtypes = map[string]uint16{"A": 1, "NS": 2, "SOA": 6, "MX": 15, "TXT": 16, "AAAA": 28, "DS": 43, "DNSKEY": 48}

// query builds a DNS query with RD=1 and an OPT record (payload 4096, DO=1), as dnsperf -D does.
func query(id uint16, name string, qtype uint16) ([]byte, error) {
	m := make([]byte, 12, 64)
	binary.BigEndian.PutUint16(m[0:], id)
	binary.BigEndian.PutUint16(m[2:], 0x0100)
	binary.BigEndian.PutUint16(m[4:], 1)
	binary.BigEndian.PutUint16(m[10:], 1)
	for _, l := range strings.Split(strings.TrimSuffix(name, "."), ".") {
		if len(l) == 0 || len(l) > 63 {
			return nil, fmt.Errorf("bad name %q", name)
		}
		m = append(m, byte(len(l)))
		m = append(m, l...)
	}
	m = append(m, 0, byte(qtype>>8), byte(qtype), 0, 1)
	m = append(m, 0, 0, 41, 0x10, 0x00, 0, 0, 0x80, 0x00, 0, 0)
	return m, nil
}

func readAnswer(c io.Reader) ([]byte, error) {
	var l [2]byte
	if _, err := io.ReadFull(c, l[:]); err != nil {
		return nil, err
	}
	b := make([]byte, binary.BigEndian.Uint16(l[:]))
	_, err := io.ReadFull(c, b)
	return b, err
}

func framed(q []byte) []byte {
	return append([]byte{byte(len(q) >> 8), byte(len(q))}, q...)
}

func curveByName(s string) (tls.CurveID, error) {
	switch strings.ToLower(s) {
	case "x25519mlkem768":
		return tls.X25519MLKEM768, nil
	case "x25519":
		return tls.X25519, nil
	case "p256", "secp256r1":
		return tls.CurveP256, nil
	}
	return 0, fmt.Errorf("unknown curve %q", s)
}

func handshake(args []string) error {
	fs := flag.NewFlagSet("handshake", flag.ExitOnError)
	addr := fs.String("addr", "127.0.0.1:30853", "DoT server address")
	caFile := fs.String("ca", "", "PEM certificate to trust (the server's self-signed certificate)")
	sni := fs.String("sni", "localhost", "server name (SNI and certificate check)")
	curveName := fs.String("curve", "X25519MLKEM768", "key exchange group: X25519MLKEM768, X25519 or P256")
	conc := fs.Int("c", 8, "concurrent workers")
	dur := fs.Duration("d", 10*time.Second, "duration")
	qname := fs.String("q", "host1.bench.", "name queried (type A) on each connection")
	fs.Parse(args)
	curve, err := curveByName(*curveName)
	if err != nil {
		return err
	}
	pem, err := os.ReadFile(*caFile)
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return errors.New("no certificate in " + *caFile)
	}
	cfg := &tls.Config{
		RootCAs:          pool,
		ServerName:       *sni,
		NextProtos:       []string{"dot"},
		MinVersion:       tls.VersionTLS13,
		CurvePreferences: []tls.CurveID{curve},
		// No ClientSessionCache: every connection is a full handshake.
	}
	q, err := query(0x1234, *qname, 1)
	if err != nil {
		return err
	}
	msg := framed(q)
	var ok, failed, wrongGroup atomic.Int64
	var mu sync.Mutex
	var lat []time.Duration
	var firstErr atomic.Value
	deadline := time.Now().Add(*dur)
	start := time.Now()
	var wg sync.WaitGroup
	for w := 0; w < *conc; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			d := net.Dialer{Timeout: 3 * time.Second}
			for time.Now().Before(deadline) {
				t0 := time.Now()
				err := func() error {
					raw, err := d.Dial("tcp", *addr)
					if err != nil {
						return err
					}
					defer raw.Close()
					raw.SetDeadline(time.Now().Add(5 * time.Second))
					c := tls.Client(raw, cfg)
					defer c.Close() // sends close_notify
					if err := c.Handshake(); err != nil {
						return err
					}
					if st := c.ConnectionState(); st.CurveID != curve {
						wrongGroup.Add(1)
					}
					if _, err := c.Write(msg); err != nil {
						return err
					}
					a, err := readAnswer(c)
					if err != nil {
						return err
					}
					if len(a) < 12 || a[0] != 0x12 || a[1] != 0x34 || a[3]&0x0f != 0 {
						return errors.New("bad answer")
					}
					return nil
				}()
				if err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
					time.Sleep(10 * time.Millisecond)
					continue
				}
				ok.Add(1)
				mine = append(mine, time.Since(t0))
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start).Seconds()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	pct := func(p float64) float64 {
		if len(lat) == 0 {
			return 0
		}
		return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000
	}
	fe, _ := firstErr.Load().(string)
	fmt.Printf("curve=%s handshakes=%d failed=%d wrong_group=%d seconds=%.3f rate=%.1f p50_ms=%.3f p99_ms=%.3f first_error=%q\n",
		curve, ok.Load(), failed.Load(), wrongGroup.Load(), elapsed, float64(ok.Load())/elapsed, pct(0.5), pct(0.99), fe)
	return nil
}

func sizes(args []string) error {
	fs := flag.NewFlagSet("sizes", flag.ExitOnError)
	addr := fs.String("addr", "127.0.0.1:30053", "server address (UDP and TCP)")
	file := fs.String("f", "", "dnsperf query file (name type per line)")
	n := fs.Int("n", 400, "queries to send (from the top of the file)")
	fs.Parse(args)
	f, err := os.Open(*file)
	if err != nil {
		return err
	}
	defer f.Close()
	type qq struct {
		name  string
		qtype uint16
	}
	var qs []qq
	sc := bufio.NewScanner(f)
	for sc.Scan() && len(qs) < *n {
		fl := strings.Fields(sc.Text())
		if len(fl) < 2 || strings.HasPrefix(fl[0], "#") {
			continue
		}
		t, ok := qtypes[strings.ToUpper(fl[1])]
		if !ok {
			return fmt.Errorf("unknown type %q", fl[1])
		}
		qs = append(qs, qq{fl[0], t})
	}
	var sent, answered, tc, udpBytes, tcpOK, tcpBytes, rcodeErr int
	buf := make([]byte, 65535)
	tcp, err := net.DialTimeout("tcp", *addr, 3*time.Second)
	if err != nil {
		return err
	}
	defer tcp.Close()
	for i, x := range qs {
		id := uint16(i + 1)
		q, err := query(id, x.name, x.qtype)
		if err != nil {
			return err
		}
		sent++
		u, err := net.Dial("udp", *addr)
		if err != nil {
			return err
		}
		u.SetDeadline(time.Now().Add(2 * time.Second))
		if _, err := u.Write(q); err == nil {
			if k, err := u.Read(buf); err == nil && k >= 12 && binary.BigEndian.Uint16(buf) == id {
				answered++
				udpBytes += k
				if buf[2]&0x02 != 0 {
					tc++
				}
				if buf[3]&0x0f != 0 {
					rcodeErr++
				}
			}
		}
		u.Close()
		tcp.SetDeadline(time.Now().Add(2 * time.Second))
		if _, err := tcp.Write(framed(q)); err != nil {
			return err
		}
		a, err := readAnswer(tcp)
		if err != nil {
			return err
		}
		if len(a) >= 12 && binary.BigEndian.Uint16(a) == id && a[2]&0x02 == 0 {
			tcpOK++
			tcpBytes += len(a)
		}
	}
	div := func(a, b int) float64 {
		if b == 0 {
			return 0
		}
		return float64(a) / float64(b)
	}
	fmt.Printf("queries=%d udp_answered=%d udp_tc=%d tc_rate=%.4f rcode_errors=%d udp_mean_bytes=%.0f tcp_answered=%d tcp_mean_bytes=%.0f\n",
		sent, answered, tc, div(tc, answered), rcodeErr, div(udpBytes, answered), tcpOK, div(tcpBytes, tcpOK))
	return nil
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: tlsload handshake|sizes [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "handshake":
		err = handshake(os.Args[2:])
	case "sizes":
		err = sizes(os.Args[2:])
	default:
		err = fmt.Errorf("unknown mode %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "tlsload:", err)
		os.Exit(1)
	}
}
