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
