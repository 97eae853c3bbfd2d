package certify_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/parley-conformance/parley/certify"
)

// TestCertifyTheReferenceHost is how an implementer certifies a host from
// their own go test; here the host is the bundled reference host, on the
// ContractRefine profiles (the whole corpus against it is the runner's
// test, TestRefhostPassesEveryRequirement; this one shows the API). In your
// repository, certify your own:
//
//	certify.Run(t, certify.Exec("./my-host-adapter"), certify.Profiles("agtp-rcns"), certify.Bundle("parley-out"))
//
// Every requirement is a subtest named by its id:
//
//	go test -run 'TestCertifyTheReferenceHost/contractrefine.tool' ./certify
//	go test -json ./certify | grep '"Test":"TestCertifyTheReferenceHost/'
func TestCertifyTheReferenceHost(t *testing.T) {
	out := t.TempDir()
	o := certify.Run(t, certify.Refhost(), certify.Profiles("contractrefine-preflight", "contractrefine-tool-binding"), certify.Bundle(out))
	if o.Statement.Predicate.Totals.ExecutedPass == 0 {
		t.Fatal("nothing passed")
	}
	if _, err := os.Stat(filepath.Join(out, "bundle.dsse.json")); err != nil {
		t.Fatalf("no bundle: %v", err)
	}
}
