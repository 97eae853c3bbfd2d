package main

import (
	"math"
	"os"
	"runtime/debug"
	"testing"
)

// TestRunSetsASoftHeapLimitUnlessGOMEMLIMITDoes: a run caps its heap softly
// by default, and an operator's GOMEMLIMIT, even an empty one, is left alone.
func TestRunSetsASoftHeapLimitUnlessGOMEMLIMITDoes(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	defer debug.SetMemoryLimit(before)

	debug.SetMemoryLimit(math.MaxInt64)
	t.Setenv("GOMEMLIMIT", "")
	softHeapLimit()
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Errorf("with GOMEMLIMIT set, the run changed the heap limit to %d", got)
	}

	unsetenv(t, "GOMEMLIMIT")
	softHeapLimit()
	if got := debug.SetMemoryLimit(-1); got != runHeapLimit {
		t.Errorf("without GOMEMLIMIT, the heap limit is %d, want %d", got, runHeapLimit)
	}
}

// unsetenv removes key for the test and restores it afterwards.
func unsetenv(t *testing.T, key string) {
	t.Setenv(key, "") // registers the restore
	if err := os.Unsetenv(key); err != nil {
		t.Fatal(err)
	}
}
