package target

import (
	"io"
	"log"
	"log/slog"
	"sync"

	tclog "github.com/testcontainers/testcontainers-go/log"
)

// LibraryLog sends what the libraries under the targets log (testcontainers
// and the container engine's client, the standard log package, log/slog's
// default logger) to w, not to the terminal: a run's console is parley's
// own. It returns a function that stops sending to w and, once no run in
// the process wants the library log any more, puts back the loggers it
// replaced. Runs may overlap in one process (certify.Run in parallel
// subtests, the CLI's own tests): while they do, each of their writers gets
// every line, since a library's line cannot be told apart by run.
func LibraryLog(w io.Writer) (restore func()) {
	libLog.mu.Lock()
	defer libLog.mu.Unlock()
	if len(libLog.sinks) == 0 {
		prevTC, prevSlog := tclog.Default(), slog.Default()
		prevOut, prevFlags := log.Writer(), log.Flags()
		slog.SetDefault(slog.New(slog.NewTextHandler(fanout{}, nil)))
		// After slog's, which points the log package at its handler.
		log.SetOutput(fanout{})
		log.SetFlags(log.LstdFlags)
		tclog.SetDefault(log.New(fanout{}, "", log.LstdFlags))
		libLog.restore = func() {
			tclog.SetDefault(prevTC)
			slog.SetDefault(prevSlog)
			log.SetOutput(prevOut)
			log.SetFlags(prevFlags)
		}
	}
	s := &sink{w}
	libLog.sinks = append(libLog.sinks, s)
	var once sync.Once
	return func() {
		once.Do(func() {
			libLog.mu.Lock()
			defer libLog.mu.Unlock()
			for i, x := range libLog.sinks {
				if x == s {
					libLog.sinks = append(libLog.sinks[:i], libLog.sinks[i+1:]...)
					break
				}
			}
			if len(libLog.sinks) == 0 {
				libLog.restore()
			}
		})
	}
}

// libLog is the process's library log: the writers of the runs that asked
// for it, and how to put back the loggers it replaced.
var libLog struct {
	mu      sync.Mutex
	sinks   []*sink
	restore func()
}

type sink struct{ w io.Writer }

// fanout writes each library line to every run's writer.
type fanout struct{}

func (fanout) Write(p []byte) (int, error) {
	libLog.mu.Lock()
	defer libLog.mu.Unlock()
	for _, s := range libLog.sinks {
		_, _ = s.w.Write(p)
	}
	return len(p), nil
}
