package contractrefine

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/parley-conformance/parley/refhost/hostenv"
)

func (hs *harness) walPath() string { return filepath.Join(hs.dir, walFileName) }

func (hs *harness) walSize() int64 {
	hs.t.Helper()
	st, err := os.Stat(hs.walPath())
	must(hs.t).NoError(err)
	return st.Size()
}

func TestWALPersistsAcrossRestart(t *testing.T) {
	hs := newHarness(t, Config{})
	var posts [][]byte
	var ids []string
	for _, s := range []string{"a", "b", "c"} {
		w, d := hs.post(goodRequest(s))
		must(t).Equal(http.StatusOK, w.Code)
		posts = append(posts, w.Body.Bytes())
		ids = append(ids, d.PreflightID)
	}
	before, err := os.ReadFile(hs.walPath())
	must(t).NoError(err)

	hs = hs.reopen(Config{})
	for i, id := range ids {
		w := hs.do(http.MethodGet, "/v1/preflight/"+id, "")
		must(t).Equal(http.StatusOK, w.Code)
		expect(t).Equal(posts[i], w.Body.Bytes())
	}
	// Appends continue the sequence after the recovered tail.
	hs.mustPost(goodRequest("d"))
	frames := hs.frames("")
	must(t).Len(frames, 4)
	expect(t).Equal(uint64(4), frames[3].Seq)
	after, err := os.ReadFile(hs.walPath())
	must(t).NoError(err)
	expect(t).True(bytes.HasPrefix(after, before), "append-only: earlier bytes are untouched")
}

func TestWALTornTailRecovery(t *testing.T) {
	for _, tail := range []string{
		`{"seq":3,"kind":"autonomy.prefl`, // crash mid-write
		"garbage\n",                       // unreadable but newline-terminated final line
	} {
		t.Run(tail, func(t *testing.T) {
			hs := newHarness(t, Config{})
			d1 := hs.mustPost(goodRequest("a"))
			hs.mustPost(goodRequest("b"))
			good := hs.walSize()
			must(t).NoError(hs.h.Close())

			f, err := os.OpenFile(hs.walPath(), os.O_WRONLY|os.O_APPEND, 0)
			must(t).NoError(err)
			_, err = f.WriteString(tail)
			must(t).NoError(err)
			must(t).NoError(f.Close())

			hs = openHarness(t, Config{}, hs.dir, hs.clock)
			expect(t).Equal(good, hs.walSize(), "torn tail truncated")
			expect(t).Contains(hs.logs.String(), "torn tail")
			expect(t).Equal(http.StatusOK, hs.do(http.MethodGet, "/v1/preflight/"+d1.PreflightID, "").Code)
			hs.mustPost(goodRequest("c"))
			frames := hs.frames("")
			must(t).Len(frames, 3)
			expect(t).Equal(uint64(3), frames[2].Seq)
		})
	}
}

func TestWALCorruptMiddleRefusesToOpen(t *testing.T) {
	hs := newHarness(t, Config{})
	hs.mustPost(goodRequest("a"))
	hs.mustPost(goodRequest("b"))
	must(t).NoError(hs.h.Close())
	f, err := os.OpenFile(hs.walPath(), os.O_WRONLY, 0)
	must(t).NoError(err)
	_, err = f.WriteAt([]byte("#"), 0)
	must(t).NoError(err)
	must(t).NoError(f.Close())

	_, err = Open(Config{}, hostenv.Env{DataDir: hs.dir})
	must(t).ErrorContains(err, "corrupt frame at offset 0")
}

func TestWALSingleWriter(t *testing.T) {
	hs := newHarness(t, Config{})
	_, err := Open(Config{}, hostenv.Env{DataDir: hs.dir})
	must(t).ErrorContains(err, "in use")
}

func TestConcurrentPreflights(t *testing.T) {
	const n = 200
	hs := newHarness(t, Config{})
	var wg sync.WaitGroup
	ids := make([]string, n)
	codes := make([]int, n)
	for i := range n {
		wg.Go(func() {
			req := goodRequest("s")
			req.Intent.PlanHash = "p" + string(rune('a'+i%26))
			if i%3 == 0 {
				req.Context.ExpectedEvidence = nil // mix in repairs
			}
			w, d := hs.post(req)
			codes[i], ids[i] = w.Code, d.PreflightID
		})
	}
	wg.Wait()
	for i := range n {
		must(t).Equal(http.StatusOK, codes[i])
	}

	frames := hs.frames("kind=autonomy.preflight")
	must(t).Len(frames, n, "exactly one frame per decision")
	seqs := map[uint64]bool{}
	byID := map[string]int{}
	for i, fr := range frames {
		expect(t).Equal(uint64(i+1), fr.Seq, "file order is seq order")
		seqs[fr.Seq] = true
		byID[fr.stringAttr("preflight_id")]++
	}
	expect(t).Len(seqs, n)
	for _, id := range ids {
		expect(t).Equal(1, byID[id], id)
	}

	// The index survives a restart and every frame is readable.
	hs = hs.reopen(Config{})
	for _, id := range ids {
		w := hs.do(http.MethodGet, "/v1/preflight/"+id, "")
		must(t).Equal(http.StatusOK, w.Code)
		var d PreflightDecision
		must(t).NoError(json.Unmarshal(w.Body.Bytes(), &d))
		must(t).Equal(id, d.PreflightID)
	}
}

func TestCloseThenServe(t *testing.T) {
	hs := newHarness(t, Config{})
	must(t).NoError(hs.h.Close())
	must(t).NoError(hs.h.Close(), "idempotent")
	w, _ := hs.post(goodRequest("s"))
	expect(t).Equal(http.StatusServiceUnavailable, w.Code)
}

func TestOpenWithoutDataDir(t *testing.T) {
	_, err := Open(Config{}, hostenv.Env{Logger: slog.New(slog.DiscardHandler)})
	must(t).ErrorContains(err, "DataDir")
}
