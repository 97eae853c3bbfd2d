package agtp

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// The hostile-peer matrix over both transports the suite speaks: each
// misbehaviour ends the exchange within the client's deadline, as an error,
// with no goroutine left behind.

type misbehaviour struct {
	name string
	// serve runs on the accepted (for TLS: handshaken) connection after the
	// request line was read, until it returns or stop closes.
	serve func(c net.Conn, stop <-chan struct{})
}

var misbehaviours = []misbehaviour{
	{"hangs after the status line", func(c net.Conn, stop <-chan struct{}) {
		io.WriteString(c, "AGTP/1.0 200 OK\r\n")
		<-stop
	}},
	{"trickles a byte at a time", func(c net.Conn, stop <-chan struct{}) {
		// A status line, then a header that never ends, a byte at a time:
		// only the client's deadline ends the exchange, however busy the
		// machine.
		head := []byte("AGTP/1.0 200 OK\r\nX-Trickle: ")
		for i := 0; ; i++ {
			b := byte('x')
			if i < len(head) {
				b = head[i]
			}
			if _, err := c.Write([]byte{b}); err != nil {
				return
			}
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}},
	{"declares a body far over the limit", func(c net.Conn, stop <-chan struct{}) {
		io.WriteString(c, "AGTP/1.0 200 OK\r\nContent-Length: 999999999\r\n\r\n")
		<-stop
	}},
	{"lies about its Content-Length", func(c net.Conn, stop <-chan struct{}) {
		io.WriteString(c, "AGTP/1.0 200 OK\r\nContent-Length: 500\r\n\r\n{}")
	}},
	{"closes in the middle of a frame", func(c net.Conn, stop <-chan struct{}) {
		io.WriteString(c, "AGTP/1.0 200 OK\r\nContent-Le")
	}},
	{"answers with an endless line", func(c net.Conn, stop <-chan struct{}) {
		io.WriteString(c, "AGTP/1.0 200 "+strings.Repeat("x", 100000))
		<-stop
	}},
}

// peer serves a misbehaviour on loopback, over TLS when cfg is set; with
// stall it never completes a TLS handshake (or, plaintext, never reads).
func peer(t *testing.T, cfg *tls.Config, m func(net.Conn, <-chan struct{}), stall bool) (addr string, reached *int32, stop func()) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	reached = new(int32)
	go func() {
		defer close(finished)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				if stall {
					<-done
					return
				}
				if cfg != nil {
					tc := tls.Server(c, cfg)
					if tc.Handshake() != nil {
						return
					}
					c = tc
				}
				if _, err := bufio.NewReader(c).ReadString('\n'); err != nil {
					return
				}
				atomic.AddInt32(reached, 1)
				m(c, done)
			}()
		}
	}()
	return l.Addr().String(), reached, func() { close(done); l.Close(); <-finished }
}

func TestAHostilePeerNeverHangsTheClient(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	srv := httptest.NewUnstartedServer(nil)
	serverTLS := srv.TLS
	if serverTLS == nil {
		// httptest's certificate, issued for 127.0.0.1.
		srv.StartTLS()
		serverTLS = srv.TLS.Clone()
		srv.Close()
	}
	serverTLS.MinVersion = tls.VersionTLS13
	serverTLS.NextProtos = []string{"agtp"}
	const deadline = 300 * time.Millisecond
	for _, transport := range []string{"plaintext", "TLS 1.3"} {
		var scfg, ccfg *tls.Config
		if transport == "TLS 1.3" {
			scfg, ccfg = serverTLS, &tls.Config{InsecureSkipVerify: true}
		}
		cases := append([]misbehaviour{}, misbehaviours...)
		cases = append(cases, misbehaviour{name: "accepts and never reads (stalls the handshake)"})
		for _, m := range cases {
			t.Run(transport+"/"+m.name, func(t *testing.T) {
				addr, reached, stop := peer(t, scfg, m.serve, m.serve == nil)
				defer stop()
				c, err := NewClient(addr, ClientOptions{TLS: ccfg, Timeout: deadline, DialTimeout: deadline})
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				req, _ := NewRequest("QUERY", "/", nil)
				start := time.Now()
				_, err = c.Do(context.Background(), req)
				if err == nil {
					t.Fatal("no error")
				}
				var fe *FrameError
				// Every peer that does not end the exchange itself holds
				// until stop, after this: only the deadline can have ended
				// it, so its duration is not checked against a margin.
				t.Logf("ended after %v: %v", time.Since(start), err)
				if errors.As(err, &fe) && fe.Status == 0 {
					t.Fatalf("a frame error without a status: %v", err)
				}
				// The misbehaviour, not a failed handshake, is what was met.
				if m.serve != nil && atomic.LoadInt32(reached) == 0 {
					t.Fatalf("the request never reached the peer: %v", err)
				}
			})
		}
	}
}
