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
	"os"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
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

// pipeListener hands the server one end of in-memory pipes that report
// loopback addresses (the server serves plaintext only on loopback). Inside
// a synctest bubble their deadlines run on the bubble's fake clock, so a
// server's read timeout is checked to the instant it is due, however busy
// the machine.
type pipeListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

var loopback = &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 9}

type loopbackConn struct{ net.Conn }

func (loopbackConn) LocalAddr() net.Addr  { return loopback }
func (loopbackConn) RemoteAddr() net.Addr { return loopback }

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error   { l.once.Do(func() { close(l.done) }); return nil }
func (l *pipeListener) Addr() net.Addr { return loopback }

// dial opens a connection to the server and returns the client's end.
func (l *pipeListener) dial(t *testing.T) net.Conn {
	client, server := net.Pipe()
	select {
	case l.conns <- loopbackConn{server}:
	case <-l.done:
		t.Fatal("the listener closed")
	}
	return client
}

// servePipes runs a server on a pipe listener in the calling synctest
// bubble; it is closed before the bubble ends.
func servePipes(t *testing.T, opt ServerOptions) *pipeListener {
	l := newPipeListener()
	s := NewServer(echo{}, opt)
	go s.Serve(l)
	t.Cleanup(func() { s.Close() })
	return l
}

func TestServerAnswersMalformedFrame(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		conn := servePipes(t, ServerOptions{}).dial(t)
		defer conn.Close()
		go io.WriteString(conn, "AGTP/1.0 BOOK /a\r\n"+strings.Repeat("X-A: 1\r\n", 100)+"\r\n")
		br := bufio.NewReader(conn)
		resp, err := ReadResponse(br, Limits{})
		if err != nil || resp.Status != 431 || !strings.Contains(string(resp.Body), "too-many-headers") {
			t.Fatalf("%+v %v", resp, err)
		}
		if _, err := br.ReadByte(); err != io.EOF {
			t.Fatalf("connection left open after a bad frame: %v", err)
		}
	})
}

func TestServerTimesOutSlowFrame(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const timeout = 200 * time.Millisecond
		conn := servePipes(t, ServerOptions{ReadTimeout: timeout}).dial(t)
		defer conn.Close()
		start := time.Now()
		// Eight of the body's ten bytes never come.
		if _, err := io.WriteString(conn, "AGTP/1.0 BOOK /a\r\nContent-Length: 10\r\n\r\nab"); err != nil {
			t.Fatal(err)
		}
		resp, err := ReadResponse(bufio.NewReader(conn), Limits{})
		if err != nil || resp.Status != 408 {
			t.Fatalf("%+v %v", resp, err)
		}
		if d := time.Since(start); d != timeout {
			t.Fatalf("the server answered 408 after %v of waiting for the frame, want its read timeout, %v", d, timeout)
		}
	})
}

// hostile runs a raw server that answers every connection with fn, once
// it has read the request line. Peers that hold a connection (silent, slow)
// hold it until the test ends: a client gets an answer from them only by
// giving up on its own deadline.
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

// until returns a channel closed when the test ends.
func until(t *testing.T) <-chan struct{} {
	end := make(chan struct{})
	t.Cleanup(func() { close(end) })
	return end
}

func TestClientAgainstHostilePeers(t *testing.T) {
	type peer struct {
		fn func(end <-chan struct{}) func(net.Conn)
		// holds says the peer never finishes its answer: only the client's
		// exchange deadline ends the exchange.
		holds bool
	}
	now := func(f func(net.Conn)) func(<-chan struct{}) func(net.Conn) {
		return func(<-chan struct{}) func(net.Conn) { return f }
	}
	cases := map[string]peer{
		"silent":       {fn: func(end <-chan struct{}) func(net.Conn) { return func(net.Conn) { <-end } }, holds: true},
		"closes":       {fn: now(func(c net.Conn) {})},
		"garbage":      {fn: now(func(c net.Conn) { io.WriteString(c, "HTTP/1.1 200 OK\r\n\r\n") })},
		"endless line": {fn: now(func(c net.Conn) { io.WriteString(c, "AGTP/1.0 200 "+strings.Repeat("x", 20000)) })},
		"short body":   {fn: now(func(c net.Conn) { io.WriteString(c, "AGTP/1.0 200 OK\r\nContent-Length: 50\r\n\r\nab") })},
		"huge body":    {fn: now(func(c net.Conn) { io.WriteString(c, "AGTP/1.0 200 OK\r\nContent-Length: 999999999\r\n\r\n") })},
		"header flood": {fn: now(func(c net.Conn) { io.WriteString(c, "AGTP/1.0 200 OK\r\n"+strings.Repeat("A: b\r\n", 1000)) })},
		"slow trickler": {fn: func(end <-chan struct{}) func(net.Conn) {
			return func(c net.Conn) { io.WriteString(c, "AGTP/1.0 200 OK\r\n"); <-end }
		}, holds: true},
	}
	for name, p := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c, err := NewClient(hostile(t, p.fn(until(t))), ClientOptions{Timeout: 300 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			req, _ := NewRequest("QUERY", "/", nil)
			_, err = c.Do(context.Background(), req)
			if err == nil {
				t.Fatal("no error")
			}
			if p.holds && !errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("a peer that never finishes its answer ended the exchange with %v, want the client's exchange deadline", err)
			}
		})
	}
}

func TestClientReconnectsAfterServerClose(t *testing.T) {
	// The peer answers one request per connection and closes it; the
	// client reads the close before its next exchange, so that exchange
	// finds its pooled connection dead and must open another.
	closed := make(chan struct{}, 3)
	addr := hostile(t, func(c net.Conn) {
		io.WriteString(c, "AGTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n")
		c.Close()
		closed <- struct{}{}
	})
	c, _ := NewClient(addr, ClientOptions{Timeout: time.Second})
	defer c.Close()
	for i := 0; i < 3; i++ {
		req, _ := NewRequest("QUERY", "/", nil)
		if resp, err := c.Do(context.Background(), req); err != nil || resp.Status != 200 {
			t.Fatalf("exchange %d: %v", i, err)
		}
		<-closed
	}
}

func TestClientContextCancel(t *testing.T) {
	// The peer holds the exchange; the caller cancels once the peer has
	// the request, and the client gives up with the context's error.
	arrived := make(chan struct{}, 1)
	end := until(t)
	addr := hostile(t, func(c net.Conn) { arrived <- struct{}{}; <-end })
	c, _ := NewClient(addr, ClientOptions{})
	defer c.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { <-arrived; cancel() }()
	req, _ := NewRequest("QUERY", "/", nil)
	if _, err := c.Do(ctx, req); !errors.Is(err, context.Canceled) {
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
