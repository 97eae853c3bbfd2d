package target

import (
	"bytes"
	"log"
	"log/slog"
	"strings"
	"testing"

	tclog "github.com/testcontainers/testcontainers-go/log"
)

// What the container library and the standard loggers print lands in the
// run's log, and the loggers are put back after.
func TestLibraryLogTakesLibraryOutput(t *testing.T) {
	var buf bytes.Buffer
	restore := LibraryLog(&buf)
	tclog.Printf("🐳 Creating container for image %s", "x")
	log.Printf("std log line")
	slog.Info("slog line")
	restore()
	for _, want := range []string{"Creating container for image x", "std log line", "slog line"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("%q is not in the library log:\n%s", want, buf.String())
		}
	}
	n := buf.Len()
	tclog.Printf("after")
	log.Printf("after")
	if buf.Len() != n {
		t.Error("the library log still receives lines after restore")
	}
}

// Runs that overlap in one process each get the library's lines while they
// last, and the loggers come back only when the last of them ends, in
// whatever order they end.
func TestOverlappingRunsShareTheLibraryLog(t *testing.T) {
	before := log.Writer()
	var a, b bytes.Buffer
	restoreA := LibraryLog(&a)
	restoreB := LibraryLog(&b)
	log.Printf("both")
	restoreA()
	log.Printf("only b")
	if log.Writer() == before {
		t.Fatal("the loggers were put back while a run still wanted the library log")
	}
	restoreB()
	restoreA() // a second call changes nothing
	if log.Writer() != before {
		t.Error("the loggers were not put back after the last run ended")
	}
	if !strings.Contains(a.String(), "both") || strings.Contains(a.String(), "only b") {
		t.Errorf("run a's log: %q", a.String())
	}
	if !strings.Contains(b.String(), "both") || !strings.Contains(b.String(), "only b") {
		t.Errorf("run b's log: %q", b.String())
	}
}
