package proofs_test

import (
	"testing"

	"github.com/parley-conformance/parley/internal/scratch"
	"github.com/parley-conformance/parley/internal/testpar"
)

// The tests here mostly wait on hosts they start: six at once, not go
// test's default of one per core (-parallel on the command line wins).
// Their scratch is on tmpfs where there is one (internal/scratch).
func TestMain(m *testing.M) { testpar.Main(m, 6, scratch.OnTmpfs()) }
