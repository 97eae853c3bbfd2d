package sabotage

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Hosts broken for the AGL permit model (agl.model.permit-claims): its
// history of concurrent dispatches and permit reads is not linearizable;
// and for the revision model (agl.model.revision-swaps): its history of
// concurrent transitions and reads of one draft is not.

// stalePermitReads is an AGL host that serves a permit's reads from a cache
// filled at its first read and never invalidated: once read, a permit reads
// unconsumed however it is claimed afterwards.
func stalePermitReads() Rule {
	var mu sync.Mutex
	cache := map[string][]byte{}
	return Rule{
		Response: func(x *Exchange, r *Response) {
			if x.Method != "GET" || !strings.HasPrefix(x.Path, aglAPI+"/permits/") || r.Status != 200 {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if b, ok := cache[x.Path]; ok {
				r.Body = append([]byte(nil), b...)
				return
			}
			cache[x.Path] = append([]byte(nil), r.Body...)
		},
	}
}

func init() {
	const id = "agl.model.permit-claims"
	aglRules = append(aglRules,
		withID(stalePermitReads(), id, "stale-reads",
			"serves permit reads from a cache filled at the first read and never invalidated, so a permit claimed after it was read still reads unconsumed"),
		Rule{ID: id, Variant: "claims-again", Response: aglDispatchAnyway("permit_consumed"),
			Broken: "dispatches a permit again after it was claimed: concurrent dispatches of one permit each complete"},
	)
	aglRules = append(aglRules, withID(lostEdits(), "agl.model.revision-swaps", "lost-edits",
		"checks an edit's expected revision before its transaction and writes without a compare-and-swap: of concurrent edits of one revision each one that passed the check writes over the other and is answered with the next revision"))
}

// lostEdits is an AGL host whose edit checks expected_revision before its
// transaction and then writes without a compare-and-swap (read, then
// write, no lock): of concurrent edits expecting one revision, each that
// passed the check before another's write committed writes over it, and is
// answered as if its own write made the next revision. An edit that
// arrives after another edit of that revision was answered is refused as
// the real host refuses it, so sequential edits, and an edit racing a
// dispatch or a proposal, behave as they should.
//
// It is emulated: an edit the host refused 409 stale_revision, which
// arrived before any edit expecting the same revision was answered, and
// finds the draft one revision on, in Draft, is answered 200 with the
// draft as it now reads (the revision its unguarded write would have made).
func lostEdits() Rule {
	var mu sync.Mutex
	answered := map[string]bool{}        // edits answered 200, by host, resource and expected revision
	overlapped := map[*Exchange]string{} // edits that arrived before any of their revision was answered
	key := func(x *Exchange) string {
		if x.Method != http.MethodPut || !strings.HasPrefix(x.Path, aglAPI+"/resources/") {
			return ""
		}
		return x.Upstream + " " + x.Path + " " + strconv.FormatInt(aglInt(aglDoc(x.Body)["expected_revision"]), 10)
	}
	return Rule{
		Intercept: func(x *Exchange) *Response {
			if k := key(x); k != "" {
				mu.Lock()
				if !answered[k] {
					overlapped[x] = k
				}
				mu.Unlock()
			}
			return nil
		},
		Response: func(x *Exchange, r *Response) {
			k := key(x)
			if k == "" {
				return
			}
			mu.Lock()
			_, fresh := overlapped[x]
			delete(overlapped, x)
			if r.Status == http.StatusOK {
				answered[k] = true
			}
			mu.Unlock()
			if !fresh || r.Status != http.StatusConflict || aglCode(r) != "stale_revision" {
				return
			}
			expected := aglInt(aglDoc(x.Body)["expected_revision"])
			client := &http.Client{Timeout: 5 * time.Second}
			resp, err := client.Get(x.Upstream + x.Path)
			if err != nil {
				return
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			cur := aglDoc(body)
			if err != nil || resp.StatusCode != http.StatusOK || aglInt(cur["revision"]) != expected+1 || aglStr(cur, "state") != "Draft" {
				return
			}
			r.Status = http.StatusOK
			r.Body = body
		},
	}
}
