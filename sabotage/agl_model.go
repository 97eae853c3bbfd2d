package sabotage

import (
	"strings"
	"sync"
)

// Hosts broken for the AGL permit model (agl.model.permit-claims): its
// history of concurrent dispatches and permit reads is not linearizable.

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
}
