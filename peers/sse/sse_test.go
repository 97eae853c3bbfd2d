package sse

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseFrames(t *testing.T) {
	in := ": hello\n\nevent: a\nid: 1\ndata: x\ndata: y\n\ndata: plain\n\nid\ndata: z\n\n"
	var got []Frame
	comments := 0
	require.NoError(t, Parse(strings.NewReader(in), 1024, func(f Frame) bool { got = append(got, f); return true }, func() { comments++ }))
	assert.Equal(t, []Frame{
		{Event: "a", ID: "1", HasID: true, Data: "x\ny"},
		{Event: "message", Data: "plain"},
		{Event: "message", ID: "", HasID: true, Data: "z"},
	}, got)
	assert.Equal(t, 1, comments)
}

func TestParseRejectsOversizedFrames(t *testing.T) {
	long := "data: " + strings.Repeat("x", 2000) + "\n\n"
	err := Parse(strings.NewReader(long), 1024, func(Frame) bool { return true }, nil)
	assert.ErrorIs(t, err, ErrFrameTooLarge)
	// Many small lines adding up to one big frame are caught as well.
	many := strings.Repeat("data: xxxxxxxx\n", 200) + "\n"
	err = Parse(strings.NewReader(many), 1024, func(Frame) bool { return true }, nil)
	assert.ErrorIs(t, err, ErrFrameTooLarge)
}

// A hostile host: one that never sends a frame, one that trickles an endless
// line, one that is not an event stream, one that never answers at all.
func TestHostileHosts(t *testing.T) {
	stop := make(chan struct{})
	defer close(stop)
	silent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-stop:
		}
	}))
	defer silent.Close()
	endless := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: ")
		for {
			if _, err := io.WriteString(w, strings.Repeat("x", 4096)); err != nil {
				return
			}
			select {
			case <-r.Context().Done():
				return
			case <-stop:
				return
			default:
			}
		}
	}))
	defer endless.Close()
	html := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = io.WriteString(w, "<html>")
	}))
	defer html.Close()
	mute := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-stop:
		}
	}))
	defer mute.Close()

	s, err := Dial(context.Background(), silent.URL, Options{})
	require.NoError(t, err)
	_, err = s.Next(100 * time.Millisecond)
	assert.ErrorIs(t, err, ErrTimeout)
	s.Close()

	s, err = Dial(context.Background(), endless.URL, Options{MaxFrameBytes: 64 << 10})
	require.NoError(t, err)
	_, err = s.Next(5 * time.Second)
	assert.ErrorIs(t, err, ErrFrameTooLarge)
	s.Close()

	_, err = Dial(context.Background(), html.URL, Options{})
	var se *StatusError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, 200, se.Status)

	begin := time.Now()
	_, err = Dial(context.Background(), mute.URL, Options{ConnectTimeout: 200 * time.Millisecond})
	assert.Error(t, err)
	assert.Less(t, time.Since(begin), 3*time.Second)
}
