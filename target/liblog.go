package target

import (
	"io"
	"log"
	"log/slog"

	tclog "github.com/testcontainers/testcontainers-go/log"
)

// LibraryLog sends what the libraries under the targets log (testcontainers
// and the container engine's client, the standard log package, log/slog's
// default logger) to w, not to the terminal: a run's console is parley's
// own. It returns a function that puts back the loggers it replaced.
func LibraryLog(w io.Writer) (restore func()) {
	prevTC, prevSlog := tclog.Default(), slog.Default()
	prevOut, prevFlags := log.Writer(), log.Flags()
	slog.SetDefault(slog.New(slog.NewTextHandler(w, nil)))
	// After slog's, which points the log package at its handler.
	log.SetOutput(w)
	log.SetFlags(log.LstdFlags)
	tclog.SetDefault(log.New(w, "", log.LstdFlags))
	return func() {
		tclog.SetDefault(prevTC)
		slog.SetDefault(prevSlog)
		log.SetOutput(prevOut)
		log.SetFlags(prevFlags)
	}
}
