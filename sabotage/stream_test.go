package sabotage

import (
	"bytes"
	"io"
	"strings"
	"testing"
)

// TestFrameRewriterEditsEachEventStreamFrame feeds an event stream with LF
// and CRLF frames, drops one, doubles another, and checks the output.
func TestFrameRewriterEditsEachEventStreamFrame(t *testing.T) {
	in := "event: a\ndata: 1\n\n" + "event: drop\r\ndata: 2\r\n\r\n" + ": keep-alive\n\n" + "event: twice\ndata: 3\n\n"
	edit := func(f []byte) [][]byte {
		switch {
		case bytes.Contains(f, []byte("drop")):
			return nil
		case bytes.Contains(f, []byte("twice")):
			return [][]byte{f, f}
		}
		return [][]byte{f}
	}
	out, err := io.ReadAll(newFrameRewriter(io.NopCloser(strings.NewReader(in)), edit))
	if err != nil {
		t.Fatal(err)
	}
	want := "event: a\ndata: 1\n\n" + ": keep-alive\n\n" + "event: twice\ndata: 3\n\n" + "event: twice\ndata: 3\n\n"
	if string(out) != want {
		t.Fatalf("got %q\nwant %q", out, want)
	}
}

func TestFrameRewriterRefusesAnEndlessFrame(t *testing.T) {
	huge := io.MultiReader(strings.NewReader("data: "), io.LimitReader(zeros{}, maxStreamFrame+10), strings.NewReader("\n\n"))
	_, err := io.ReadAll(newFrameRewriter(io.NopCloser(huge), func(f []byte) [][]byte { return [][]byte{f} }))
	if err == nil || !strings.Contains(err.Error(), "exceeds") {
		t.Fatalf("want a frame-size error, got %v", err)
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'x'
	}
	return len(p), nil
}
