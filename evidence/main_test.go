package evidence_test

import (
	"testing"

	"github.com/parley-conformance/parley/internal/scratch"
	"github.com/parley-conformance/parley/internal/testpar"
)

// The hosts these tests start keep their stores and state on tmpfs where
// the machine has one (internal/scratch).
func TestMain(m *testing.M) { testpar.Main(m, 0, scratch.OnTmpfs()) }
