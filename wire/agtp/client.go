package agtp

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"time"
)

// IsLoopback reports whether host (a name or IP, without port) is a loopback
// address. Only IP literals and "localhost" count: a name that merely
// resolves to loopback today is not trusted to do so tomorrow.
func IsLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// AddrIsLoopback is IsLoopback for a net.Addr or "host:port" string.
func AddrIsLoopback(a net.Addr) bool {
	if a == nil {
		return false
	}
	if tcp, ok := a.(*net.TCPAddr); ok {
		return tcp.IP.IsLoopback()
	}
	host, _, err := net.SplitHostPort(a.String())
	return err == nil && IsLoopback(host)
}

// ClientOptions configures a Client. TLS nil means plaintext, which is only
// permitted towards a loopback address.
type ClientOptions struct {
	TLS         *tls.Config
	Limits      Limits
	DialTimeout time.Duration // default 5 s
	Timeout     time.Duration // whole exchange (write request, read response); default 15 s
	// OneShot opens a fresh connection for every exchange.
	OneShot bool
}

// Client speaks AGTP/1.0 to one server address over a persistent connection
// that it reopens when the server has closed it. Do is safe for concurrent
// use; exchanges on one Client are serialised (no pipelining).
type Client struct {
	addr string
	opt  ClientOptions

	mu   sync.Mutex
	conn net.Conn
	br   *bufio.Reader
	cr   countReader
}

// countReader counts the bytes that arrive, so Do can tell "closed before
// answering" from "closed mid-response".
type countReader struct {
	r io.Reader
	n int64
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// ErrPlaintextNotLoopback is returned when plaintext is requested towards a
// non-loopback address.
var ErrPlaintextNotLoopback = errors.New("agtp: plaintext is only allowed to a loopback address; configure TLS 1.3")

// NewClient validates the options; it does not dial.
func NewClient(addr string, opt ClientOptions) (*Client, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("agtp: address %q: %w", addr, err)
	}
	if opt.TLS == nil && !IsLoopback(host) {
		return nil, ErrPlaintextNotLoopback
	}
	if opt.TLS != nil {
		c := opt.TLS.Clone()
		c.MinVersion = tls.VersionTLS13
		if c.ServerName == "" && net.ParseIP(host) == nil {
			c.ServerName = host
		}
		if len(c.NextProtos) == 0 {
			c.NextProtos = []string{"agtp"}
		}
		opt.TLS = c
	}
	if opt.DialTimeout <= 0 {
		opt.DialTimeout = 5 * time.Second
	}
	if opt.Timeout <= 0 {
		opt.Timeout = 15 * time.Second
	}
	opt.Limits = opt.Limits.withDefaults()
	return &Client{addr: addr, opt: opt}, nil
}

// Addr is the server address.
func (c *Client) Addr() string { return c.addr }

func (c *Client) dial(ctx context.Context) error {
	d := net.Dialer{Timeout: c.opt.DialTimeout}
	if c.opt.TLS == nil {
		conn, err := d.DialContext(ctx, "tcp", c.addr)
		if err != nil {
			return fmt.Errorf("agtp: dial %s: %w", c.addr, err)
		}
		if !AddrIsLoopback(conn.RemoteAddr()) {
			conn.Close()
			return ErrPlaintextNotLoopback
		}
		c.setConn(conn)
		return nil
	}
	td := tls.Dialer{NetDialer: &d, Config: c.opt.TLS}
	conn, err := td.DialContext(ctx, "tcp", c.addr)
	if err != nil {
		return fmt.Errorf("agtp: TLS dial %s: %w", c.addr, err)
	}
	if v := conn.(*tls.Conn).ConnectionState().Version; v != tls.VersionTLS13 {
		conn.Close()
		return fmt.Errorf("agtp: server negotiated TLS version %#x, need 1.3", v)
	}
	c.setConn(conn)
	return nil
}

// stale reports whether an idle pooled connection has been closed by the
// server (or has unsolicited bytes, which also makes it unusable). It asks
// the socket without waiting where the platform allows (peekIdle), so a
// live connection costs no delay.
func (c *Client) stale() bool {
	if c.br.Buffered() > 0 {
		return true // bytes nobody asked for
	}
	if gone, ok := peekIdle(c.conn); ok {
		return gone
	}
	_ = c.conn.SetReadDeadline(time.Now().Add(time.Millisecond))
	_, err := c.br.Peek(1)
	_ = c.conn.SetReadDeadline(time.Time{})
	if err == nil {
		return true
	}
	var ne net.Error
	return !(errors.As(err, &ne) && ne.Timeout())
}

func (c *Client) setConn(conn net.Conn) {
	c.conn = conn
	c.cr = countReader{r: conn}
	c.br = bufio.NewReader(&c.cr)
}

func (c *Client) closeLocked() {
	if c.conn != nil {
		c.conn.Close()
		c.conn, c.br = nil, nil
	}
}

// Close closes the pooled connection, if any.
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closeLocked()
	return nil
}

// Do sends req and reads the response within the exchange timeout (or the
// context's deadline, whichever is sooner). When a reused connection turns
// out to have been closed by the server before it read anything (the write
// fails, or the connection ends before a single response byte), the request
// is sent once more on a fresh connection; a fresh connection is never
// retried, so a server that reads a request and hangs up gets it only once
// per fresh connection.
func (c *Client) Do(ctx context.Context, req *Request) (*Response, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if req.Header == nil {
		req.Header = Header{}
	}
	if c.conn != nil && (c.opt.OneShot || c.stale()) {
		c.closeLocked()
	}
	reused := c.conn != nil
	resp, err := c.exchange(ctx, req)
	if err != nil && reused && ctx.Err() == nil && errors.Is(err, errPeerGone) {
		resp, err = c.exchange(ctx, req)
	}
	if err != nil {
		return nil, err
	}
	if c.opt.OneShot {
		c.closeLocked()
	}
	return resp, nil
}

// errPeerGone marks a connection the server closed before answering.
var errPeerGone = errors.New("server closed the connection without answering")

func peerGone(err error) bool {
	return errors.Is(err, ErrNoFrame) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

func (c *Client) exchange(ctx context.Context, req *Request) (*Response, error) {
	if c.conn == nil {
		if err := c.dial(ctx); err != nil {
			return nil, err
		}
	}
	deadline := time.Now().Add(c.opt.Timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	conn := c.conn
	_ = conn.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if err := req.Write(conn); err != nil {
		c.closeLocked()
		if peerGone(err) {
			err = fmt.Errorf("%w: %w", errPeerGone, err)
		}
		return nil, c.wrap(ctx, "writing request", err)
	}
	c.cr.n = 0
	resp, err := ReadResponse(c.br, c.opt.Limits)
	if err != nil {
		c.closeLocked()
		if peerGone(err) && c.cr.n == 0 {
			err = fmt.Errorf("%w: %w", errPeerGone, err)
		}
		return nil, c.wrap(ctx, "reading response", err)
	}
	_ = conn.SetDeadline(time.Time{})
	return resp, nil
}

func (c *Client) wrap(ctx context.Context, what string, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("agtp: %s: %w", what, ctx.Err())
	}
	if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
		// The connection deadline was the context's and fired first.
		return fmt.Errorf("agtp: %s: %w", what, context.DeadlineExceeded)
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return fmt.Errorf("agtp: %s: no complete frame within the exchange deadline: %w", what, err)
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("agtp: %s: connection closed mid-frame: %w", what, err)
	}
	return fmt.Errorf("agtp: %s: %w", what, err)
}
