package perid_test

import (
	"strings"
	"testing"
)

// TestEachAGLEvidenceIdFailsUnderEveryRuleForIt: each agl.evidence
// requirement (profile agl-evidence, and the checker's in agl-checker)
// passes on the reference host and fails against every rule that breaks
// it, each of its scenarios under some rule (proveEachId).
func TestEachAGLEvidenceIdFailsUnderEveryRuleForIt(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs the evidence scenarios against sabotaged hosts")
	}
	reg, _ := load(t)
	var ids []string
	for _, e := range reg.Entries {
		if strings.HasPrefix(e.ID, "agl.evidence.") && e.Witness != "unwitnessable" {
			ids = append(ids, e.ID)
		}
	}
	if len(ids) < 12 {
		t.Fatalf("there are %d witnessed agl.evidence ids, want at least 12", len(ids))
	}
	proveEachId(t, ids)
}
