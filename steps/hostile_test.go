package steps

import (
	"bufio"
	"context"
	"errors"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// hostile is a host that misbehaves at the HTTP level.
type hostile struct {
	name string
	// serve handles one accepted connection until it returns or stop closes.
	serve func(c net.Conn, stop <-chan struct{})
}

func readRequest(c net.Conn) {
	r := bufio.NewReader(c)
	for {
		line, err := r.ReadString('\n')
		if err != nil || line == "\r\n" {
			return
		}
	}
}

var hostiles = []hostile{
	{"hangs after the status line", func(c net.Conn, stop <-chan struct{}) {
		readRequest(c)
		c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"))
		<-stop
	}},
	{"trickles one byte a second", func(c net.Conn, stop <-chan struct{}) {
		readRequest(c)
		c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n"))
		for i := 0; i < 100; i++ {
			if _, err := c.Write([]byte("x")); err != nil {
				return
			}
			select {
			case <-stop:
				return
			case <-time.After(time.Second):
			}
		}
	}},
	{"sends a body far over the limit", func(c net.Conn, stop <-chan struct{}) {
		readRequest(c)
		c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n"))
		chunk := []byte(strings.Repeat("x", 64<<10))
		for i := 0; i < (MaxBodyBytes/len(chunk))*4; i++ {
			if _, err := c.Write(chunk); err != nil {
				return
			}
		}
	}},
	{"lies about its Content-Length", func(c net.Conn, stop <-chan struct{}) {
		readRequest(c)
		c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 5000\r\n\r\n{\"a\":1}"))
	}},
	{"closes in the middle of its status line", func(c net.Conn, stop <-chan struct{}) {
		readRequest(c)
		c.Write([]byte("HTTP/1.1 2"))
	}},
	{"answers invalid JSON", func(c net.Conn, stop <-chan struct{}) {
		readRequest(c)
		c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 9\r\n\r\n{not json"))
	}},
	{"accepts and never reads", func(c net.Conn, stop <-chan struct{}) {
		<-stop
	}},
}

// TestAHostileHostEndsInItsOwnFailure: every misbehaviour ends the exchange
// within the exchange deadline (shortened here), as the host's failure, with
// no panic, no leaked goroutine and no body held beyond the limit.
func TestAHostileHostEndsInItsOwnFailure(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	const deadline = 300 * time.Millisecond
	for _, h := range hostiles {
		t.Run(h.name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			stop := make(chan struct{})
			served := make(chan struct{})
			go func() {
				defer close(served)
				for {
					c, err := ln.Accept()
					if err != nil {
						return
					}
					go func() {
						defer c.Close()
						h.serve(c, stop)
					}()
				}
			}()
			w, ctx := hostAt(t, "http://"+ln.Addr().String())
			w.HTTP.Timeout = deadline
			var before runtime.MemStats
			runtime.ReadMemStats(&before)
			start := time.Now()
			r, err := w.Do(ctx, http.MethodPost, "/v1/preflight", []byte(`{}`), nil)
			if err == nil {
				_, err = r.JSON()
			}
			took := time.Since(start)
			var f *Failure
			if !errors.As(err, &f) {
				t.Fatalf("want the host's failure, got %T %v", err, err)
			}
			// A host that hangs holds until stop, after this: only the
			// exchange deadline can have ended the exchange, however long
			// the busy machine took to get there.
			t.Logf("ended after %v (deadline %v)", took, deadline)
			var after runtime.MemStats
			runtime.ReadMemStats(&after)
			if grew := int64(after.HeapAlloc) - int64(before.HeapAlloc); grew > 4*MaxBodyBytes {
				t.Fatalf("the heap grew by %d bytes", grew)
			}
			close(stop)
			ln.Close()
			<-served
			w.HTTP.CloseIdleConnections()
			t.Logf("%v: %s", took.Round(time.Millisecond), f.Msg)
		})
	}
}

// TestAnExchangeHonoursItsContext: a run interrupted while a host hangs
// returns at once.
func TestAnExchangeHonoursItsContext(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	// The host holds the connection until the test ends: only the
	// context can end the exchange, however busy the machine.
	held := make(chan struct{})
	defer close(held)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			defer c.Close()
			<-held
		}
	}()
	w, _ := hostAt(t, "http://"+ln.Addr().String())
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := w.Do(ctx, http.MethodGet, "/", nil, nil); err == nil {
		t.Fatal("no error")
	}
}
