// Package evsource is a fake evidence source: it serves documents the
// suite sets, whose bytes (and so digests) the suite knows and may change,
// optionally only to a client presenting a bearer credential.
//
//	GET /doc/{name}   the document's bytes (404 when unset; 401 without the credential, when one is set)
//
// It logs every request, so the suite can say what the host retrieved.
package evsource

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strings"
	"sync"
)

// Server is a fake source; use New.
type Server struct {
	mu         sync.Mutex
	docs       map[string][]byte
	credential string
	gets       int
}

// New returns a source that asks for credential (none when empty).
func New(credential string) *Server {
	return &Server{docs: map[string][]byte{}, credential: credential}
}

// Set serves body as document name from now on and returns its digest.
func (s *Server) Set(name string, body []byte) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.docs[name] = append([]byte(nil), body...)
	return Digest(body)
}

// Gets is how many retrievals the source answered with a document.
func (s *Server) Gets() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gets
}

// Digest is the digest a receipt must record for body.
func Digest(body []byte) string {
	sum := sha256.Sum256(body)
	return "sha256:" + hex.EncodeToString(sum[:])
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	name, ok := strings.CutPrefix(r.URL.Path, "/doc/")
	if r.Method != http.MethodGet || !ok {
		http.NotFound(w, r)
		return
	}
	s.mu.Lock()
	body, found := s.docs[name]
	cred := s.credential
	s.mu.Unlock()
	if cred != "" && r.Header.Get("Authorization") != "Bearer "+cred {
		http.Error(w, "credential required", http.StatusUnauthorized)
		return
	}
	if !found {
		http.NotFound(w, r)
		return
	}
	s.mu.Lock()
	s.gets++
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Write(body)
}
