package agtp

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"math/big"
	"net"
	"strings"
	"testing"
	"time"
)

type echo struct{}

func (echo) ServeAGTP(_ context.Context, ci ConnInfo, r *Request) *Response {
	h := Header{}
	h.Set("X-Method", r.Method)
	if ci.TLS {
		h.Set("X-TLS", "1")
	}
	return &Response{Status: 200, Header: h, Body: r.Body}
}

func listen(t *testing.T) net.Listener {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func serve(t *testing.T, l net.Listener, opt ServerOptions) {
	s := NewServer(echo{}, opt)
	go s.Serve(l)
	t.Cleanup(func() { s.Close() })
}

func TestClientServerPlaintextLoopback(t *testing.T) {
	l := listen(t)
	serve(t, l, ServerOptions{})
	c, err := NewClient(l.Addr().String(), ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i := 0; i < 3; i++ {
		req, _ := NewRequest("QUERY", "/", []byte(`{"i":1}`))
		resp, err := c.Do(context.Background(), req)
		if err != nil || resp.Status != 200 || string(resp.Body) != `{"i":1}` || resp.Header.Get("X-Method") != "QUERY" {
			t.Fatalf("exchange %d: %+v %v", i, resp, err)
		}
	}
}

func TestPlaintextRefusedOffLoopback(t *testing.T) {
	if _, err := NewClient("192.0.2.1:4480", ClientOptions{}); !errors.Is(err, ErrPlaintextNotLoopback) {
		t.Fatalf("got %v", err)
	}
	if _, err := NewClient("example.com:4480", ClientOptions{}); !errors.Is(err, ErrPlaintextNotLoopback) {
		t.Fatalf("got %v", err)
	}
	if !AddrIsLoopback(&net.TCPAddr{IP: net.IPv6loopback}) || AddrIsLoopback(&net.TCPAddr{IP: net.IPv4(10, 0, 0, 1)}) {
		t.Fatal("loopback detection")
	}
}

func selfSigned(t *testing.T) (tls.Certificate, *x509.CertPool) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "agtp-test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tpl, tpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, pool
}

func TestTLS13(t *testing.T) {
	cert, pool := selfSigned(t)
	l := tls.NewListener(listen(t), &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS13})
	serve(t, l, ServerOptions{})
	c, err := NewClient(l.Addr().String(), ClientOptions{TLS: &tls.Config{RootCAs: pool}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i := 0; i < 3; i++ { // reuse of the TLS connection included
		req, _ := NewRequest("QUERY", "/", nil)
		resp, err := c.Do(context.Background(), req)
		if err != nil || resp.Header.Get("X-TLS") != "1" {
			t.Fatalf("%+v %v", resp, err)
		}
	}
}

func TestServerRefusesTLS12(t *testing.T) {
	cert, pool := selfSigned(t)
	l := tls.NewListener(listen(t), &tls.Config{Certificates: []tls.Certificate{cert}})
	serve(t, l, ServerOptions{})
	conn, err := tls.Dial("tcp", l.Addr().String(), &tls.Config{RootCAs: pool, MaxVersion: tls.VersionTLS12})
	if err != nil {
		return // refused at handshake: fine
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(2 * time.Second))
	io.WriteString(conn, "AGTP/1.0 QUERY /\r\n\r\n")
	if _, err := ReadResponse(bufio.NewReader(conn), Limits{}); err == nil {
		t.Fatal("served over TLS 1.2")
	}
}

func TestServerAnswersMalformedFrame(t *testing.T) {
	l := listen(t)
	serve(t, l, ServerOptions{})
	conn, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(3 * time.Second))
	io.WriteString(conn, "AGTP/1.0 BOOK /a\r\n"+strings.Repeat("X-A: 1\r\n", 100)+"\r\n")
	br := bufio.NewReader(conn)
	resp, err := ReadResponse(br, Limits{})
	if err != nil || resp.Status != 431 || !strings.Contains(string(resp.Body), "too-many-headers") {
		t.Fatalf("%+v %v", resp, err)
	}
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("connection left open after a bad frame: %v", err)
	}
}

func TestServerTimesOutSlowFrame(t *testing.T) {
	l := listen(t)
	serve(t, l, ServerOptions{ReadTimeout: 200 * time.Millisecond})
	conn, _ := net.Dial("tcp", l.Addr().String())
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(3 * time.Second))
	io.WriteString(conn, "AGTP/1.0 BOOK /a\r\nContent-Length: 10\r\n\r\nab")
	resp, err := ReadResponse(bufio.NewReader(conn), Limits{})
	if err != nil || resp.Status != 408 {
		t.Fatalf("%+v %v", resp, err)
	}
}

// hostile runs a raw server that answers every connection with fn.
func hostile(t *testing.T, fn func(net.Conn)) string {
	l := listen(t)
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				bufio.NewReader(c).ReadString('\n')
				fn(c)
			}()
		}
	}()
	return l.Addr().String()
}

func TestClientAgainstHostilePeers(t *testing.T) {
	cases := map[string]func(net.Conn){
		"silent":        func(c net.Conn) { time.Sleep(2 * time.Second) },
		"closes":        func(c net.Conn) {},
		"garbage":       func(c net.Conn) { io.WriteString(c, "HTTP/1.1 200 OK\r\n\r\n") },
		"endless line":  func(c net.Conn) { io.WriteString(c, "AGTP/1.0 200 "+strings.Repeat("x", 20000)) },
		"short body":    func(c net.Conn) { io.WriteString(c, "AGTP/1.0 200 OK\r\nContent-Length: 50\r\n\r\nab") },
		"huge body":     func(c net.Conn) { io.WriteString(c, "AGTP/1.0 200 OK\r\nContent-Length: 999999999\r\n\r\n") },
		"header flood":  func(c net.Conn) { io.WriteString(c, "AGTP/1.0 200 OK\r\n"+strings.Repeat("A: b\r\n", 1000)) },
		"slow trickler": func(c net.Conn) { io.WriteString(c, "AGTP/1.0 200 OK\r\n"); time.Sleep(2 * time.Second) },
	}
	for name, fn := range cases {
		t.Run(name, func(t *testing.T) {
			c, err := NewClient(hostile(t, fn), ClientOptions{Timeout: 300 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			req, _ := NewRequest("QUERY", "/", nil)
			start := time.Now()
			if _, err := c.Do(context.Background(), req); err == nil {
				t.Fatal("no error")
			}
			if d := time.Since(start); d > time.Second {
				t.Fatalf("took %v", d)
			}
		})
	}
}

func TestClientReconnectsAfterServerClose(t *testing.T) {
	addr := hostile(t, func(c net.Conn) { io.WriteString(c, "AGTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n") })
	c, _ := NewClient(addr, ClientOptions{Timeout: time.Second})
	defer c.Close()
	for i := 0; i < 3; i++ {
		req, _ := NewRequest("QUERY", "/", nil)
		if resp, err := c.Do(context.Background(), req); err != nil || resp.Status != 200 {
			t.Fatalf("exchange %d: %v", i, err)
		}
		time.Sleep(20 * time.Millisecond) // let the close arrive
	}
}

func TestClientContextCancel(t *testing.T) {
	addr := hostile(t, func(c net.Conn) { time.Sleep(2 * time.Second) })
	c, _ := NewClient(addr, ClientOptions{Timeout: 5 * time.Second})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	req, _ := NewRequest("QUERY", "/", nil)
	if _, err := c.Do(ctx, req); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v", err)
	}
}

func TestClientRetriesOnceWhenIdleConnWasClosed(t *testing.T) {
	// A server that answers one request per connection, then closes; the
	// client must not fail on the dead pooled connection even without a
	// pause between exchanges.
	addr := hostile(t, func(c net.Conn) { io.WriteString(c, "AGTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n") })
	c, _ := NewClient(addr, ClientOptions{Timeout: time.Second})
	defer c.Close()
	for i := 0; i < 20; i++ {
		req, _ := NewRequest("QUERY", "/", nil)
		if _, err := c.Do(context.Background(), req); err != nil {
			t.Fatalf("exchange %d: %v", i, err)
		}
	}
}

func TestServerConnectionLimit(t *testing.T) {
	l := listen(t)
	serve(t, l, ServerOptions{MaxConns: 1})
	c1, _ := NewClient(l.Addr().String(), ClientOptions{})
	defer c1.Close()
	req, _ := NewRequest("QUERY", "/", nil)
	if _, err := c1.Do(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	c2, _ := NewClient(l.Addr().String(), ClientOptions{Timeout: time.Second})
	defer c2.Close()
	if _, err := c2.Do(context.Background(), req); err == nil {
		t.Fatal("second connection served beyond MaxConns")
	}
}
