package agtp

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"sync"
	"time"
)

// Handler answers one request. conn describes the connection it came on.
type Handler interface {
	ServeAGTP(ctx context.Context, conn ConnInfo, req *Request) *Response
}

// ConnInfo describes the connection a request arrived on.
type ConnInfo struct {
	ID         string // unique per connection; an AGTP session lives on it
	RemoteAddr net.Addr
	TLS        bool
}

// ServerOptions configures Serve.
type ServerOptions struct {
	Limits Limits
	// IdleTimeout bounds the wait for the first byte of the next request
	// (the drafts describe sessions idle at least 60 s). Default 120 s.
	IdleTimeout time.Duration
	// ReadTimeout bounds reading one frame once its first byte arrived.
	// Default 15 s.
	ReadTimeout  time.Duration
	WriteTimeout time.Duration // default 15 s
	// MaxConns caps concurrent connections; beyond it a new connection is
	// closed at once. Default 1024.
	MaxConns int
	Logger   *slog.Logger
	// ServerID, when set, is sent as Server-ID (with a fresh Response-ID) on
	// the error answers the loop writes itself for malformed frames.
	ServerID string
	// ConnClosed, when set, is called after a connection ends (for
	// session-scoped state).
	ConnClosed func(ConnInfo)
}

// Server runs the connection loop around a Handler.
type Server struct {
	h   Handler
	opt ServerOptions

	mu       sync.Mutex
	ls       map[net.Listener]struct{}
	conns    map[net.Conn]struct{}
	closed   bool
	wg       sync.WaitGroup
	warnOnce sync.Once
	nextID   uint64
}

// ErrServerClosed is returned by Serve after Close.
var ErrServerClosed = errors.New("agtp: server closed")

// NewServer wraps h.
func NewServer(h Handler, opt ServerOptions) *Server {
	opt.Limits = opt.Limits.withDefaults()
	if opt.IdleTimeout <= 0 {
		opt.IdleTimeout = 120 * time.Second
	}
	if opt.ReadTimeout <= 0 {
		opt.ReadTimeout = 15 * time.Second
	}
	if opt.WriteTimeout <= 0 {
		opt.WriteTimeout = 15 * time.Second
	}
	if opt.MaxConns <= 0 {
		opt.MaxConns = 1024
	}
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	return &Server{h: h, opt: opt, ls: map[net.Listener]struct{}{}, conns: map[net.Conn]struct{}{}}
}

// Serve accepts connections until l fails or Close is called. A connection
// that is not TLS is served only when its local and remote addresses are
// both loopback; otherwise it is closed without a byte read.
func (s *Server) Serve(l net.Listener) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrServerClosed
	}
	s.ls[l] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.ls, l)
		s.mu.Unlock()
	}()
	var backoff time.Duration
	for {
		c, err := l.Accept()
		if err != nil {
			s.mu.Lock()
			closed := s.closed
			s.mu.Unlock()
			if closed {
				return ErrServerClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				time.Sleep(backoff)
				continue
			}
			return err
		}
		backoff = 0
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			c.Close()
			return ErrServerClosed
		}
		if len(s.conns) >= s.opt.MaxConns {
			s.mu.Unlock()
			s.opt.Logger.Warn("agtp: connection limit reached; closing new connection", "limit", s.opt.MaxConns)
			c.Close()
			continue
		}
		s.conns[c] = struct{}{}
		s.nextID++
		id := s.nextID
		s.wg.Add(1)
		s.mu.Unlock()
		go s.serveConn(c, id)
	}
}

func (s *Server) serveConn(c net.Conn, id uint64) {
	defer s.wg.Done()
	defer func() {
		c.Close()
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
	}()
	info := ConnInfo{ID: connID(id), RemoteAddr: c.RemoteAddr()}
	log := s.opt.Logger.With("remote", c.RemoteAddr().String())
	if tc, ok := c.(*tls.Conn); ok {
		_ = tc.SetDeadline(time.Now().Add(s.opt.ReadTimeout))
		if err := tc.Handshake(); err != nil {
			log.Info("agtp: TLS handshake failed", "err", err)
			return
		}
		if v := tc.ConnectionState().Version; v != tls.VersionTLS13 {
			log.Warn("agtp: refusing TLS below 1.3", "version", v)
			return
		}
		info.TLS = true
	} else {
		if !AddrIsLoopback(c.LocalAddr()) || !AddrIsLoopback(c.RemoteAddr()) {
			log.Error("agtp: refusing plaintext connection on a non-loopback address; TLS 1.3 is mandatory")
			return
		}
		s.warnOnce.Do(func() {
			log.Warn("agtp: serving PLAINTEXT on loopback; this is for local testing only, TLS 1.3 is mandatory elsewhere")
		})
	}
	if s.opt.ConnClosed != nil {
		defer s.opt.ConnClosed(info)
	}
	br := bufio.NewReaderSize(c, 4096)
	for {
		_ = c.SetReadDeadline(time.Now().Add(s.opt.IdleTimeout))
		if _, err := br.Peek(1); err != nil {
			return // idle timeout, close or reset
		}
		_ = c.SetReadDeadline(time.Now().Add(s.opt.ReadTimeout))
		req, err := ReadRequest(br, s.opt.Limits)
		if err != nil {
			var fe *FrameError
			if errors.As(err, &fe) {
				// Answer, then close: after a bad frame the stream
				// position is unknown.
				s.write(c, s.decorate(ErrorResponse(fe.Status, fe.Reason, fe.Msg)))
				return
			}
			if isTimeout(err) {
				s.write(c, s.decorate(ErrorResponse(408, "frame-timeout", "the request frame did not arrive completely in time")))
			}
			return
		}
		_ = c.SetReadDeadline(time.Time{})
		resp := s.h.ServeAGTP(context.Background(), info, req)
		if resp == nil {
			resp = ErrorResponse(500, "internal-error", "no response")
		}
		if !s.write(c, resp) {
			return
		}
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func (s *Server) decorate(r *Response) *Response {
	if s.opt.ServerID != "" {
		var b [16]byte
		_, _ = rand.Read(b[:])
		r.Header.Set("Server-ID", s.opt.ServerID)
		r.Header.Set("Response-ID", "rsp_"+hex.EncodeToString(b[:]))
	}
	return r
}

func (s *Server) write(c net.Conn, resp *Response) bool {
	if resp.Header == nil {
		resp.Header = Header{}
	}
	_ = c.SetWriteDeadline(time.Now().Add(s.opt.WriteTimeout))
	err := resp.Write(c)
	_ = c.SetWriteDeadline(time.Time{})
	return err == nil
}

// Close stops every listener and connection and waits for handlers.
func (s *Server) Close() error {
	s.mu.Lock()
	s.closed = true
	for l := range s.ls {
		l.Close()
	}
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return nil
}

func connID(n uint64) string {
	const hex = "0123456789abcdef"
	b := []byte("conn-0000000000000000")
	for i := len(b) - 1; n > 0; i-- {
		b[i] = hex[n&15]
		n >>= 4
	}
	return string(b)
}

// ErrorBody is the error envelope used on every refusal: the RCNS reason sits
// under error.reason, as the public AGTP implementation places it.
type ErrorBody struct {
	Status int         `json:"status"`
	Error  ErrorDetail `json:"error"`
}

// ErrorDetail is the error object.
type ErrorDetail struct {
	Code        int    `json:"code"`
	Reason      string `json:"reason"`
	Explanation string `json:"explanation,omitempty"`
}

// ErrorResponse builds a JSON error response.
func ErrorResponse(status int, reason, explanation string) *Response {
	b, _ := json.Marshal(ErrorBody{Status: status, Error: ErrorDetail{Code: status, Reason: reason, Explanation: explanation}})
	h := Header{}
	h.Set("Content-Type", MediaType)
	return &Response{Status: status, Header: h, Body: b}
}
