package agtp

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"testing"

	"github.com/parley-conformance/parley/internal/benchpair"
)

// BenchmarkClientExchange measures the suite's AGTP client (deadlines,
// bounded parsing, connection reuse) against a bare round trip on the same
// framing and the same server: the request's bytes written on a kept
// connection and the known number of response bytes read back.
func BenchmarkClientExchange(b *testing.B) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	s := NewServer(echo{}, ServerOptions{})
	go s.Serve(l)
	defer s.Close()

	body := []byte(`{"method":"BOOK","task_id":"task-1","parameters":{"id":"room-1"}}`)
	req, _ := NewRequest("BOOK", "/room/room-1", body)
	req.Header.Set("Agent-ID", "0a")
	req.Header.Set("Content-Type", MediaType)
	var raw bytes.Buffer
	if err := req.Write(&raw); err != nil {
		b.Fatal(err)
	}
	conn, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	br := bufio.NewReader(conn)
	// The size of one answer, learned once.
	if _, err := conn.Write(raw.Bytes()); err != nil {
		b.Fatal(err)
	}
	first, err := ReadResponse(br, DefaultLimits())
	if err != nil {
		b.Fatal(err)
	}
	var sized bytes.Buffer
	_ = first.Write(&sized)
	answer := make([]byte, sized.Len())

	c, err := NewClient(l.Addr().String(), ClientOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	benchpair.Run(b, "client/bare", func(b *testing.B) {
		if _, err := conn.Write(raw.Bytes()); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(br, answer); err != nil {
			b.Fatal(err)
		}
	}, func(b *testing.B) {
		r, _ := NewRequest("BOOK", "/room/room-1", body)
		r.Header.Set("Agent-ID", "0a")
		r.Header.Set("Content-Type", MediaType)
		if _, err := c.Do(ctx, r); err != nil {
			b.Fatal(err)
		}
	})
}
