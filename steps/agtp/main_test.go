package agtp_test

import (
	"testing"

	"github.com/parley-conformance/parley/internal/scratch"
	"github.com/parley-conformance/parley/internal/testpar"
)

// The long tests here wait on hosts of their own: four at once, not go
// test's default of one per core (-parallel on the command line wins).
// Their scratch is on tmpfs where there is one (internal/scratch).
func TestMain(m *testing.M) { testpar.Main(m, 4, scratch.OnTmpfs()) }
