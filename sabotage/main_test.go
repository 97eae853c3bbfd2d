package sabotage_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/parley-conformance/parley/internal/scratch"
	"github.com/parley-conformance/parley/internal/testpar"
)

// The long tests here wait on hosts of their own: four at once, not go
// test's default of one per core (-parallel on the command line wins).
// The walhost binary both WAL proofs build once is removed at the end.
func TestMain(m *testing.M) {
	testpar.Main(m, 4, scratch.OnTmpfs(), func() {
		if walhostBin != "" {
			_ = os.RemoveAll(filepath.Dir(walhostBin))
		}
	})
}
