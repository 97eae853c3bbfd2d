// Package sse reads a host's Server-Sent Events stream (OpenWOP's
// /host/events) on the suite's behalf. The host is untrusted: every wait has
// a deadline, every frame a size limit, and a stream that misbehaves ends in
// an error rather than a hung or crashed suite.
package sse

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/parley-conformance/parley/peers/internal/wire"
)

// Frame is one dispatched event.
type Frame struct {
	Event string // "message" when the frame named no type
	// ID is the frame's id field; HasID tells an absent id from an empty one.
	ID    string
	HasID bool
	Data  string
}

// Options configures Dial. The zero value is usable.
type Options struct {
	APIKey      string
	LastEventID string
	// MaxFrameBytes caps one frame (all its lines); default 1 MiB.
	MaxFrameBytes int
	// ConnectTimeout bounds the wait for response headers; default 10 s.
	ConnectTimeout time.Duration
	// Header holds extra request headers.
	Header http.Header
	// Transport replaces the default transport (e.g. for TLS settings).
	Transport http.RoundTripper
}

// ErrTimeout is returned by Next when no frame arrived in time.
var ErrTimeout = errors.New("sse: no frame before the deadline")

// StatusError is a response that is not an event stream.
type StatusError struct {
	Status      int
	ContentType string
	Body        string // at most 4 KiB, for the report
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("sse: status %d, content-type %q", e.Status, e.ContentType)
}

// Stream is an open event stream.
type Stream struct {
	// Status and Header are the response's.
	Status int
	Header http.Header

	cancel  context.CancelFunc
	body    io.ReadCloser
	frames  chan Frame
	done    chan struct{}
	errMu   sync.Mutex
	err     error
	closeMu sync.Once

	commentMu sync.Mutex
	comments  int
}

// Dial opens url with Accept: text/event-stream. It fails with *StatusError
// unless the host answers 200 with a text/event-stream body.
func Dial(ctx context.Context, url string, opts Options) (*Stream, error) {
	if opts.MaxFrameBytes <= 0 {
		opts.MaxFrameBytes = wire.DefaultMaxBody
	}
	if opts.ConnectTimeout <= 0 {
		opts.ConnectTimeout = wire.DefaultTimeout
	}
	sctx, cancel := context.WithCancel(ctx)
	req, err := http.NewRequestWithContext(sctx, http.MethodGet, url, nil)
	if err != nil {
		cancel()
		return nil, err
	}
	for k, vs := range opts.Header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	req.Header.Set("Accept", "text/event-stream")
	if opts.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+opts.APIKey)
	}
	if opts.LastEventID != "" {
		req.Header.Set("Last-Event-ID", opts.LastEventID)
	}
	// No client-wide timeout: the stream is long-lived. The header wait is
	// bounded by a timer that cancels the request.
	client := &http.Client{
		Transport:     opts.Transport,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	timer := time.AfterFunc(opts.ConnectTimeout, cancel)
	resp, err := client.Do(req)
	if !timer.Stop() && err == nil {
		resp.Body.Close()
		cancel()
		return nil, fmt.Errorf("sse: no response headers within %s", opts.ConnectTimeout)
	}
	if err != nil {
		cancel()
		return nil, err
	}
	ct := resp.Header.Get("Content-Type")
	mt, _, _ := mime.ParseMediaType(ct)
	if resp.StatusCode != http.StatusOK || mt != "text/event-stream" {
		b, _ := wire.ReadLimited(resp.Body, 4096)
		resp.Body.Close()
		cancel()
		return nil, &StatusError{Status: resp.StatusCode, ContentType: ct, Body: string(b)}
	}
	s := &Stream{
		Status: resp.StatusCode, Header: resp.Header,
		cancel: cancel, body: resp.Body,
		frames: make(chan Frame, 64), done: make(chan struct{}),
	}
	go s.read(opts.MaxFrameBytes)
	return s, nil
}

// Next returns the next frame, waiting at most timeout. After the stream
// ends it returns the error that ended it (io.EOF for a clean close).
func (s *Stream) Next(timeout time.Duration) (Frame, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case f, ok := <-s.frames:
		if !ok {
			return Frame{}, s.Err()
		}
		return f, nil
	case <-t.C:
		return Frame{}, ErrTimeout
	}
}

// Until returns the first frame for which match is true, skipping others,
// within an overall timeout.
func (s *Stream) Until(timeout time.Duration, match func(Frame) bool) (Frame, error) {
	deadline := time.Now().Add(timeout)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return Frame{}, ErrTimeout
		}
		f, err := s.Next(left)
		if err != nil {
			return Frame{}, err
		}
		if match(f) {
			return f, nil
		}
	}
}

// Comments is how many comment lines (keep-alives) the stream carried.
func (s *Stream) Comments() int {
	s.commentMu.Lock()
	defer s.commentMu.Unlock()
	return s.comments
}

// Err is the error that ended the stream, nil while it is open.
func (s *Stream) Err() error {
	s.errMu.Lock()
	defer s.errMu.Unlock()
	return s.err
}

// Close ends the stream and releases the connection.
func (s *Stream) Close() {
	s.closeMu.Do(func() {
		close(s.done)
		s.cancel()
		s.body.Close()
	})
}

func (s *Stream) read(max int) {
	err := Parse(s.body, max, func(f Frame) bool {
		select {
		case s.frames <- f:
			return true
		case <-s.done:
			return false
		}
	}, func() {
		s.commentMu.Lock()
		s.comments++
		s.commentMu.Unlock()
	})
	if err == nil {
		err = io.EOF
	}
	s.errMu.Lock()
	s.err = err
	s.errMu.Unlock()
	close(s.frames)
}

// ErrFrameTooLarge is returned when one frame or line exceeds the limit.
var ErrFrameTooLarge = errors.New("sse: frame exceeds the size limit")

// Parse reads an event stream from r, calling emit for each dispatched frame
// (stop by returning false) and comment for each comment line. It returns nil
// at a clean end of input.
func Parse(r io.Reader, maxFrame int, emit func(Frame) bool, comment func()) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), maxFrame+2)
	var (
		f     Frame
		data  strings.Builder
		size  int
		dirty bool
	)
	for sc.Scan() {
		line := sc.Text()
		size += len(line) + 1
		if size > maxFrame {
			return ErrFrameTooLarge
		}
		if line == "" {
			if dirty && data.Len() > 0 {
				f.Data = strings.TrimSuffix(data.String(), "\n")
				if f.Event == "" {
					f.Event = "message"
				}
				if !emit(f) {
					return nil
				}
			}
			f, size, dirty = Frame{}, 0, false
			data.Reset()
			continue
		}
		if strings.HasPrefix(line, ":") {
			if comment != nil {
				comment()
			}
			size -= len(line) + 1
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		dirty = true
		switch field {
		case "event":
			f.Event = value
		case "data":
			data.WriteString(value)
			data.WriteByte('\n')
		case "id":
			if !strings.ContainsRune(value, 0) {
				f.ID, f.HasID = value, true
			}
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return ErrFrameTooLarge
		}
		return err
	}
	return nil
}
