package agtp

import (
	"bufio"
	"bytes"
	"errors"
	"testing"
)

var fuzzLimits = Limits{MaxLineBytes: 512, MaxHeaders: 16, MaxHeaderBytes: 2048, MaxBodyBytes: 4096}

// FuzzReadRequest checks that the parser never panics, never returns both a
// frame and an error, and that whatever it accepts re-serialises to a frame
// it parses to the same request.
func FuzzReadRequest(f *testing.F) {
	for _, s := range []string{
		"AGTP/1.0 BOOK /room\r\nAgent-ID: 0a\r\nAllow-RCNS: true\r\nContent-Length: 2\r\n\r\n{}",
		"AGTP/1.0 DISCOVER /contracts?x=1\r\n\r\n",
		"AGTP/1.0 PROPOSE /\r\nContent-Length: 0\r\n\r\n",
		"AGTP/1.0 BOOK /a#b\r\n\r\n",
		"AGTP/1.0 BOOK /a\r\nTransfer-Encoding: chunked\r\n\r\n",
		"AGTP/1.0 BOOK /a\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
		"AGTP/1.0 BOOK /a\r\n A: folded\r\n\r\n",
		"AGTP/1.0 BOOK /a\n\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		req, err := ReadRequest(bufio.NewReader(bytes.NewReader(data)), fuzzLimits)
		if err != nil {
			if req != nil {
				t.Fatal("frame and error together")
			}
			return
		}
		if int64(len(req.Body)) > fuzzLimits.MaxBodyBytes {
			t.Fatalf("body of %d bytes over the limit", len(req.Body))
		}
		var b bytes.Buffer
		if err := req.Write(&b); err != nil {
			t.Fatalf("accepted frame does not re-serialise: %v", err)
		}
		again, err := ReadRequest(bufio.NewReader(&b), Limits{})
		if err != nil {
			t.Fatalf("re-serialised frame rejected: %v\n%q", err, b.String())
		}
		if again.Method != req.Method || again.Target != req.Target || !bytes.Equal(again.Body, req.Body) || len(again.Header) > len(req.Header)+1 {
			t.Fatalf("round trip changed the frame: %+v vs %+v", again, req)
		}
	})
}

// FuzzReadResponse checks the status-line parser the same way.
func FuzzReadResponse(f *testing.F) {
	for _, s := range []string{
		"AGTP/1.0 464 RCNS No Contract\r\nRCNS-Attempt-Id: a1\r\nContent-Length: 13\r\n\r\n{\"error\":{}}\n",
		"AGTP/1.0 200\r\n\r\n",
		"AGTP/1.0 461 RCNS Contract Available\r\nContent-Length: 0\r\n\r\n",
		"AGTP/1.0 99 X\r\n\r\n",
		"AGTP/1.0 200 OK\r\nContent-Length: 99999999\r\n\r\n",
		"AGTP/1.0 200 OK\r\nContent-Length: 5\r\n\r\nab",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		resp, err := ReadResponse(bufio.NewReader(bytes.NewReader(data)), fuzzLimits)
		if err != nil {
			var fe *FrameError
			if resp != nil || (errors.As(err, &fe) && (fe.Status < 400 || fe.Reason == "")) {
				t.Fatalf("bad error shape: %v", err)
			}
			return
		}
		if resp.Status < 100 || resp.Status > 599 {
			t.Fatalf("status %d accepted", resp.Status)
		}
		var b bytes.Buffer
		if err := resp.Write(&b); err != nil {
			t.Fatalf("accepted frame does not re-serialise: %v", err)
		}
		again, err := ReadResponse(bufio.NewReader(&b), Limits{})
		if err != nil || again.Status != resp.Status || !bytes.Equal(again.Body, resp.Body) {
			t.Fatalf("round trip: %v %+v", err, again)
		}
	})
}
