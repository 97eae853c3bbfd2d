package agtp

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

func rd(s string) *bufio.Reader { return bufio.NewReader(strings.NewReader(s)) }

func TestRequestRoundTrip(t *testing.T) {
	req, err := NewRequest("BOOK", "/room?x=1", []byte(`{"a":1}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("agent-id", "abc")
	req.Header.Set("Allow-RCNS", "true")
	var b bytes.Buffer
	if err := req.Write(&b); err != nil {
		t.Fatal(err)
	}
	want := "AGTP/1.0 BOOK /room?x=1\r\nAgent-Id: abc\r\nAllow-Rcns: true\r\nContent-Length: 7\r\n\r\n{\"a\":1}"
	if b.String() != want {
		t.Fatalf("wire:\n%q\nwant\n%q", b.String(), want)
	}
	got, err := ReadRequest(bufio.NewReader(&b), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Method != "BOOK" || got.Path != "/room" || got.RawQuery != "x=1" || got.Header.Get("AGENT-ID") != "abc" || string(got.Body) != `{"a":1}` {
		t.Fatalf("parsed %+v", got)
	}
}

func TestResponseRoundTrip(t *testing.T) {
	r := &Response{Status: 464, Header: Header{}, Body: []byte("{}")}
	r.Header.Set("RCNS-Attempt-Id", "x")
	var b bytes.Buffer
	if err := r.Write(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(b.String(), "AGTP/1.0 464 RCNS No Contract\r\n") {
		t.Fatalf("status line: %q", b.String())
	}
	got, err := ReadResponse(bufio.NewReader(&b), Limits{})
	if err != nil || got.Status != 464 || got.Header.Get("rcns-attempt-id") != "x" || string(got.Body) != "{}" {
		t.Fatalf("got %+v, %v", got, err)
	}
	// Empty reason text is tolerated: only the number counts.
	got, err = ReadResponse(rd("AGTP/1.0 200\r\n\r\n"), Limits{})
	if err != nil || got.Status != 200 {
		t.Fatalf("bare status: %+v %v", got, err)
	}
}

func TestMalformedRequests(t *testing.T) {
	cases := map[string]struct {
		in     string
		status int
	}{
		"wrong version":      {"HTTP/1.1 GET /\r\n\r\n", 400},
		"lower method":       {"AGTP/1.0 book /\r\n\r\n", 400},
		"short method":       {"AGTP/1.0 GO /\r\n\r\n", 400},
		"fragment":           {"AGTP/1.0 BOOK /a#b\r\n\r\n", 400},
		"relative target":    {"AGTP/1.0 BOOK room\r\n\r\n", 400},
		"extra space":        {"AGTP/1.0 BOOK /a b\r\n\r\n", 400},
		"bare lf":            {"AGTP/1.0 BOOK /a\n\r\n", 400},
		"folded header":      {"AGTP/1.0 BOOK /a\r\nA: b\r\n c\r\n\r\n", 400},
		"no colon":           {"AGTP/1.0 BOOK /a\r\nAb\r\n\r\n", 400},
		"bad name":           {"AGTP/1.0 BOOK /a\r\nA b: c\r\n\r\n", 400},
		"negative length":    {"AGTP/1.0 BOOK /a\r\nContent-Length: -1\r\n\r\n", 400},
		"conflicting length": {"AGTP/1.0 BOOK /a\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab", 400},
		"chunked":            {"AGTP/1.0 BOOK /a\r\nTransfer-Encoding: chunked\r\n\r\n", 400},
		"huge body":          {"AGTP/1.0 BOOK /a\r\nContent-Length: 99999999999\r\n\r\n", 413},
		"long line":          {"AGTP/1.0 BOOK /" + strings.Repeat("a", 9000) + "\r\n\r\n", 431},
		"many headers":       {"AGTP/1.0 BOOK /a\r\n" + strings.Repeat("A: b\r\n", 65) + "\r\n", 431},
	}
	for name, c := range cases {
		_, err := ReadRequest(rd(c.in), Limits{})
		var fe *FrameError
		if !errors.As(err, &fe) || fe.Status != c.status {
			t.Errorf("%s: got %v, want FrameError %d", name, err, c.status)
		}
	}
}

func TestTruncatedAndEmpty(t *testing.T) {
	if _, err := ReadRequest(rd(""), Limits{}); !errors.Is(err, ErrNoFrame) {
		t.Fatalf("empty: %v", err)
	}
	for _, in := range []string{"AGTP/1.0 BO", "AGTP/1.0 BOOK /a\r\nA: b", "AGTP/1.0 BOOK /a\r\nContent-Length: 5\r\n\r\nab"} {
		if _, err := ReadRequest(rd(in), Limits{}); !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("%q: %v", in, err)
		}
	}
}

func TestMalformedResponses(t *testing.T) {
	for _, in := range []string{"AGTP/1.0 20 OK\r\n\r\n", "AGTP/1.0 700 X\r\n\r\n", "HTTP/1.1 200 OK\r\n\r\n", "AGTP/1.0 2x0 OK\r\n\r\n", "AGTP/1.0 200 O\x01K\r\n\r\n"} {
		var fe *FrameError
		if _, err := ReadResponse(rd(in), Limits{}); !errors.As(err, &fe) {
			t.Errorf("%q: %v", in, err)
		}
	}
}

func TestWriteRefusesInjection(t *testing.T) {
	r := &Response{Status: 200, Header: Header{"X": {"a\r\nEvil: 1"}}}
	if err := r.Write(io.Discard); err == nil {
		t.Fatal("header injection written")
	}
}
