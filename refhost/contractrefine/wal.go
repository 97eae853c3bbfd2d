package contractrefine

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// walFileName is the WAL inside the host's DataDir.
const walFileName = "wal.jsonl"

var (
	errWALClosed   = errors.New("wal: closed")
	errWALInjected = errors.New("wal: emit failure injected (faults.wal_emit)")
	errWALReadInj  = errors.New("wal: read failure injected (faults.wal_read)")
)

// walFrame is one line of the WAL as written.
type walFrame struct {
	Seq   uint64         `json:"seq"`
	Kind  string         `json:"kind"`
	Time  string         `json:"time"`
	Attrs map[string]any `json:"attrs"`
}

// rawFrame is one line of the WAL as read back; attrs stay raw so readers
// see exactly what was written.
type rawFrame struct {
	Seq   uint64                     `json:"seq"`
	Kind  string                     `json:"kind"`
	Time  string                     `json:"time"`
	Attrs map[string]json.RawMessage `json:"attrs"`
}

// stringAttr returns a string attribute, or "" when absent or not a string.
func (f *rawFrame) stringAttr(name string) string {
	var s string
	if raw, ok := f.Attrs[name]; ok && json.Unmarshal(raw, &s) == nil {
		return s
	}
	return ""
}

// frameLoc locates a committed frame; n excludes the trailing newline.
type frameLoc struct {
	off int64
	n   int
}

// wal is an append-only JSON-lines log. Appends are serialized and fsync'd
// before they are acknowledged; readers only ever see committed bytes.
type wal struct {
	path string

	mu     sync.Mutex // guards everything below and serializes appends
	f      *os.File
	unlock func() error
	size   int64 // committed length of the file
	seq    uint64
	index  map[string]frameLoc // preflight_id -> frame, so GET never re-scans
	fail   bool                // injected emit fault
	failRd bool                // injected read fault
	// failRdAgents injects the read fault into the frames of these
	// actor.agent_ids only (a fault scoped to agents, agents.<id>.faults).
	failRdAgents map[string]bool
	broken       error // set once the file's tail can no longer be trusted
	closed       bool

	// seam is what the WAL read seam filters on, for every committed
	// frame it has already decoded (seamIndex).
	seam seamIndex
}

// seamIndex keeps, for each committed frame a read of the seam has already
// decoded, where the frame lies and what the seam filters on, so that each
// read decodes only the frames appended since the one before. Without it
// every read decoded the whole file: a fixture host's WAL holds the frames
// of every scenario that leased it, and reading it per step grew with the
// square of the run. Built only when the seam is asked (seams are off
// unless the host is started with them).
type seamIndex struct {
	mu     sync.Mutex // serializes reads of the seam
	frames []seamFrame
	size   int64 // bytes of the file the index covers
}

type seamFrame struct {
	loc   frameLoc
	kind  string
	attrs map[string]string // attrText of each attribute
}

// openWAL opens (creating if needed) the WAL in dir, truncates a torn final
// line left by a crash mid-append, and replays every committed frame to
// replay so the caller can rebuild its own state.
func openWAL(dir string, log *slog.Logger, fail, failRead bool, failReadAgents map[string]bool, replay func(*rawFrame)) (*wal, error) {
	path := filepath.Join(dir, walFileName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("wal: open: %w", err)
	}
	unlock, err := lockFile(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("wal: %s is in use by another host: %w", path, err)
	}
	w := &wal{path: path, f: f, unlock: unlock, index: map[string]frameLoc{}, fail: fail, failRd: failRead, failRdAgents: failReadAgents}
	if err := w.recover(log, replay); err != nil {
		w.closeFile()
		return nil, err
	}
	// Make the file's directory entry durable too, not just its contents.
	if err := syncDir(dir); err != nil {
		w.closeFile()
		return nil, err
	}
	return w, nil
}

func (w *wal) recover(log *slog.Logger, replay func(*rawFrame)) error {
	r := bufio.NewReaderSize(io.NewSectionReader(w.f, 0, 1<<62), 64<<10)
	var off int64
	for {
		line, err := r.ReadBytes('\n')
		if errors.Is(err, io.EOF) {
			if len(line) > 0 {
				return w.truncateTail(log, off, len(line), "no final newline")
			}
			break
		}
		if err != nil {
			return fmt.Errorf("wal: read at offset %d: %w", off, err)
		}
		var fr rawFrame
		if perr := json.Unmarshal(line[:len(line)-1], &fr); perr != nil || fr.Kind == "" || fr.Seq <= w.seq {
			// Only the last line can be a casualty of a crash; damage
			// anywhere else is corruption an operator must look at.
			if _, peek := r.Peek(1); errors.Is(peek, io.EOF) {
				return w.truncateTail(log, off, len(line), "unreadable final line")
			}
			return fmt.Errorf("wal: %s: corrupt frame at offset %d", w.path, off)
		}
		w.seq = fr.Seq
		if fr.Kind == KindPreflight {
			if id := fr.stringAttr("preflight_id"); id != "" {
				w.index[id] = frameLoc{off: off, n: len(line) - 1}
			}
		}
		replay(&fr)
		off += int64(len(line))
	}
	w.size = off
	return nil
}

func (w *wal) truncateTail(log *slog.Logger, off int64, n int, why string) error {
	log.Warn("contractrefine WAL: truncating torn tail left by an interrupted append",
		slog.String("path", w.path), slog.Int64("offset", off), slog.Int("bytes", n), slog.String("why", why))
	if err := w.f.Truncate(off); err != nil {
		return fmt.Errorf("wal: truncate torn tail: %w", err)
	}
	if err := w.f.Sync(); err != nil {
		return fmt.Errorf("wal: sync after truncate: %w", err)
	}
	w.size = off
	return nil
}

// append writes one frame and fsyncs it. indexID, when set, is the
// preflight_id the frame answers for.
func (w *wal) append(kind string, now time.Time, attrs map[string]any, indexID string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.closed:
		return errWALClosed
	case w.fail:
		return errWALInjected
	case w.broken != nil:
		return w.broken
	}
	line, err := json.Marshal(walFrame{Seq: w.seq + 1, Kind: kind, Time: now.UTC().Format(time.RFC3339Nano), Attrs: attrs})
	if err != nil {
		return fmt.Errorf("wal: encode frame: %w", err)
	}
	line = append(line, '\n')
	if _, err := w.f.Write(line); err != nil {
		w.rollback(err)
		return fmt.Errorf("wal: write: %w", err)
	}
	if err := w.f.Sync(); err != nil {
		// After a failed fsync the page cache can't be trusted to match
		// the disk, so stop accepting appends rather than guess.
		w.rollback(err)
		w.broken = fmt.Errorf("wal: unusable after fsync failure: %w", err)
		return fmt.Errorf("wal: fsync: %w", err)
	}
	if indexID != "" {
		w.index[indexID] = frameLoc{off: w.size, n: len(line) - 1}
	}
	w.size += int64(len(line))
	w.seq++
	return nil
}

// rollback cuts a partially written frame so the next append does not land
// after half a line.
func (w *wal) rollback(cause error) {
	if err := w.f.Truncate(w.size); err != nil {
		w.broken = fmt.Errorf("wal: cannot roll back failed append (%v): %w", cause, err)
	}
}

// lookup returns the committed autonomy.preflight frame for id.
func (w *wal) lookup(id string) (*rawFrame, bool, error) {
	w.mu.Lock()
	loc, ok := w.index[id]
	closed, failRd := w.closed, w.failRd
	w.mu.Unlock()
	if closed {
		return nil, false, errWALClosed
	}
	if failRd {
		return nil, false, errWALReadInj
	}
	if !ok {
		return nil, false, nil
	}
	buf := make([]byte, loc.n)
	if _, err := w.f.ReadAt(buf, loc.off); err != nil {
		return nil, false, fmt.Errorf("wal: read frame at offset %d: %w", loc.off, err)
	}
	var fr rawFrame
	if err := json.Unmarshal(buf, &fr); err != nil {
		return nil, false, fmt.Errorf("wal: decode frame at offset %d: %w", loc.off, err)
	}
	if fr.Kind != KindPreflight || fr.stringAttr("preflight_id") != id {
		return nil, false, fmt.Errorf("wal: frame at offset %d is not preflight %s", loc.off, id)
	}
	if w.failRdAgents[fr.stringAttr("actor_agent_id")] {
		return nil, false, errWALReadInj
	}
	return &fr, true, nil
}

// scan reads every committed frame from the file, in file order.
func (w *wal) scan(fn func(line []byte, fr *rawFrame) error) error {
	w.mu.Lock()
	size, closed := w.size, w.closed
	w.mu.Unlock()
	if closed {
		return errWALClosed
	}
	r := bufio.NewReaderSize(io.NewSectionReader(w.f, 0, size), 64<<10)
	for {
		line, err := r.ReadBytes('\n')
		if errors.Is(err, io.EOF) && len(line) == 0 {
			return nil
		}
		if err != nil {
			return fmt.Errorf("wal: scan: %w", err)
		}
		line = bytes.TrimSuffix(line, []byte{'\n'})
		var fr rawFrame
		if err := json.Unmarshal(line, &fr); err != nil {
			return fmt.Errorf("wal: scan: decode frame: %w", err)
		}
		if err := fn(line, &fr); err != nil {
			return err
		}
	}
}

// matching returns, in file order, the committed frames keep accepts, each
// read back from the file as it was written.
func (w *wal) matching(keep func(kind string, attrs map[string]string) bool) ([]json.RawMessage, error) {
	w.mu.Lock()
	size, closed := w.size, w.closed
	w.mu.Unlock()
	if closed {
		return nil, errWALClosed
	}
	x := &w.seam
	x.mu.Lock()
	defer x.mu.Unlock()
	if size > x.size {
		r := bufio.NewReaderSize(io.NewSectionReader(w.f, x.size, size-x.size), 64<<10)
		for off := x.size; off < size; {
			line, err := r.ReadBytes('\n')
			if err != nil {
				return nil, fmt.Errorf("wal: read at offset %d: %w", off, err)
			}
			var fr rawFrame
			if err := json.Unmarshal(line[:len(line)-1], &fr); err != nil {
				return nil, fmt.Errorf("wal: decode frame at offset %d: %w", off, err)
			}
			attrs := make(map[string]string, len(fr.Attrs))
			for name, raw := range fr.Attrs {
				attrs[name] = attrText(raw)
			}
			x.frames = append(x.frames, seamFrame{loc: frameLoc{off: off, n: len(line) - 1}, kind: fr.Kind, attrs: attrs})
			off += int64(len(line))
		}
		x.size = size
	}
	out := []json.RawMessage{}
	for _, f := range x.frames {
		if !keep(f.kind, f.attrs) {
			continue
		}
		buf := make([]byte, f.loc.n)
		if _, err := w.f.ReadAt(buf, f.loc.off); err != nil {
			return nil, fmt.Errorf("wal: read frame at offset %d: %w", f.loc.off, err)
		}
		out = append(out, buf)
	}
	return out, nil
}

func (w *wal) close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	w.closed = true
	return w.closeFile()
}

func (w *wal) closeFile() error {
	err := w.unlock()
	return errors.Join(err, w.f.Close())
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("wal: open dir: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("wal: sync dir: %w", err)
	}
	return nil
}
