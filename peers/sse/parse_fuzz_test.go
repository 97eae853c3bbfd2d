package sse

import (
	"bytes"
	"errors"
	"testing"
)

// FuzzParse: an event stream is the host's, hence untrusted. The parser
// never panics, never emits a frame larger than its bound, and ends either
// cleanly or with ErrFrameTooLarge.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"event: negotiation.decided\nid: 7\ndata: {\"a\":1}\n\n",
		": keep-alive\n\ndata: x\r\ndata: y\r\n\r\n",
		"data\nid\nevent\nretry: 10\n\n",
		"id: a\x00b\ndata: z\n\n",
		"data: no end",
	} {
		f.Add([]byte(s))
	}
	const max = 512
	f.Fuzz(func(t *testing.T, stream []byte) {
		frames := 0
		err := Parse(bytes.NewReader(stream), max, func(fr Frame) bool {
			frames++
			if len(fr.Data)+len(fr.Event)+len(fr.ID) > max {
				t.Fatalf("a frame of %d bytes past the bound %d", len(fr.Data)+len(fr.Event)+len(fr.ID), max)
			}
			return true
		}, func() {})
		if err != nil && !errors.Is(err, ErrFrameTooLarge) {
			t.Fatalf("unexpected error %v", err)
		}
		if frames > len(stream) {
			t.Fatalf("%d frames from %d bytes", frames, len(stream))
		}
	})
}
