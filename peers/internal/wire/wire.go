// Package wire holds what the fake peers and the suite-side clients share:
// bounded reads and a hardened HTTP client. Everything
// here assumes the other side may be hostile.
package wire

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"time"

	"github.com/parley-conformance/parley/wire/version"
)

// Defaults for suite-side clients.
const (
	DefaultTimeout = 10 * time.Second
	DefaultMaxBody = 1 << 20
)

// Choose is how a fake server answers a requested version: the version
// itself when supported, else the newest supported version not newer than
// it, else the newest supported version. ok is false when supported is empty.
func Choose(supported []string, requested string) (string, bool) {
	if len(supported) == 0 {
		return "", false
	}
	vs := slices.Clone(supported)
	slices.SortFunc(vs, version.Compare)
	if requested != "" && slices.Contains(vs, requested) {
		return requested, true
	}
	best := ""
	for _, v := range vs {
		if requested != "" && version.Compare(v, requested) <= 0 {
			best = v
		}
	}
	if best == "" {
		best = vs[len(vs)-1]
	}
	return best, true
}

// Digest is the SHA-256 hex of an origin, as an OpenWOP peerDigest.
func Digest(origin string) string {
	s := sha256.Sum256([]byte(origin))
	return hex.EncodeToString(s[:])
}

// ReadLimited reads at most max bytes and fails past that rather than
// truncating silently.
func ReadLimited(r io.Reader, max int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return b, err
	}
	if int64(len(b)) > max {
		return b[:max], fmt.Errorf("body exceeds %d bytes", max)
	}
	return b, nil
}

// Client returns c, or a client with the default deadline, that never
// follows redirects: a step asserts on what the host itself answered.
func Client(c *http.Client, timeout time.Duration) *http.Client {
	if c != nil {
		return c
	}
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	return &http.Client{
		Timeout:       timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// Authorize adds what attributes an exchange to a tenant and workspace: a
// bearer key and the OpenWOP-Workspace-Id header, each only when set.
func Authorize(req *http.Request, apiKey, workspace string) {
	if apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+apiKey)
	}
	if workspace != "" {
		req.Header.Set("OpenWOP-Workspace-Id", workspace)
	}
}

// Fetch performs req with the hardened client and reads at most maxBody
// bytes of the answer (DefaultMaxBody when maxBody <= 0).
func Fetch(hc *http.Client, timeout time.Duration, maxBody int64, req *http.Request) (*http.Response, []byte, error) {
	resp, err := Client(hc, timeout).Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	if maxBody <= 0 {
		maxBody = DefaultMaxBody
	}
	b, err := ReadLimited(resp.Body, maxBody)
	if err != nil {
		return nil, nil, err
	}
	return resp, b, nil
}

// StartServer serves h on a loopback port with read deadlines, so a host
// under test that stalls mid-request cannot pin a fake peer forever.
func StartServer(h http.Handler) *httptest.Server {
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ReadHeaderTimeout = 5 * time.Second
	srv.Config.ReadTimeout = 10 * time.Second
	srv.Start()
	return srv
}
