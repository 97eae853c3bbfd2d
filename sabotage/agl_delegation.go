package sabotage

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Rules for bounded delegation (spec 4.3, 13 Stage 3; the agl.delegation.*
// ids). They learn the grants from the traffic they forward: which grant a
// token is, which grant each delegated grant came from, each grant's use
// count, and how many dispatches each grant token made.

var aglDlg struct {
	sync.Mutex
	byToken map[string]string // grant token -> grant id
	token   map[string]string // grant id -> token
	parent  map[string]string // delegated grant id -> parent grant id
	maxUses map[string]int64  // grant id -> max_uses, when it has one
	direct  map[string]int64  // grant token -> dispatches answered 200 under it
}

func aglDlgLearn(x *Exchange, r *Response) {
	aglDlg.Lock()
	defer aglDlg.Unlock()
	if aglDlg.byToken == nil {
		aglDlg.byToken, aglDlg.token, aglDlg.parent = map[string]string{}, map[string]string{}, map[string]string{}
		aglDlg.maxUses, aglDlg.direct = map[string]int64{}, map[string]int64{}
	}
	switch {
	case x.Method == http.MethodPost && (x.Path == aglAPI+"/grants" || aglDelegation(x)) && r.Status == http.StatusCreated:
		d := aglDoc(r.Body)
		id, tok := aglStr(d, "grant_id"), aglStr(d, "grant_token")
		if id == "" || tok == "" {
			return
		}
		aglDlg.byToken[tok], aglDlg.token[id] = id, tok
		if p := aglStr(d, "parent_grant_id"); p != "" {
			aglDlg.parent[id] = p
		}
		if n, ok := d["max_uses"].(json.Number); ok {
			if v, err := n.Int64(); err == nil {
				aglDlg.maxUses[id] = v
			}
		}
	case aglDispatch(x) && r.Status == http.StatusOK:
		if tok := aglStr(aglDoc(x.Body), "grant_token"); tok != "" {
			aglDlg.direct[tok]++
		}
	}
}

func aglDelegation(x *Exchange) bool {
	return x.Method == http.MethodPost && strings.HasPrefix(x.Path, aglAPI+"/grants/") && strings.HasSuffix(x.Path, "/delegations")
}

// aglDelegatedGrant says whether grant id (or, with byToken, the grant a
// token is) was issued by a delegation.
func aglDelegatedGrant(id string, byToken bool) bool {
	aglDlg.Lock()
	defer aglDlg.Unlock()
	if byToken {
		id = aglDlg.byToken[id]
	}
	return aglDlg.parent[id] != ""
}

// aglWithLearning runs the rule's rewrite after learning from the answer.
func aglWithLearning(rewrite func(x *Exchange, r *Response)) func(x *Exchange, r *Response) {
	return func(x *Exchange, r *Response) {
		aglDlgLearn(x, r)
		if rewrite != nil {
			rewrite(x, r)
		}
	}
}

// aglAsHost sends the request to the host behind the proxy, as the
// sabotaged host would have handled it, and answers with what it said.
func aglAsHost(x *Exchange, method, path, bearer string, body []byte) *Response {
	req, err := http.NewRequest(method, x.Upstream+path, bytes.NewReader(body))
	if err != nil {
		return nil
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+bearer)
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	r := &Response{Status: resp.StatusCode, Header: http.Header{"Content-Type": {"application/json"}}, Body: b}
	aglDlgLearn(&Exchange{Method: method, Path: path, Body: body}, r)
	return r
}

// aglDropDetail deletes members of error.detail from refusals with code
// on matching exchanges.
func aglDropDetail(match func(*Exchange) bool, code string, members ...string) func(x *Exchange, r *Response) {
	return func(x *Exchange, r *Response) {
		if !match(x) || aglCode(r) != code {
			return
		}
		d := aglDoc(r.Body)
		e, _ := d["error"].(map[string]any)
		det, _ := e["detail"].(map[string]any)
		if det == nil {
			return
		}
		for _, m := range members {
			delete(det, m)
		}
		r.SetJSON(d)
	}
}

var aglDelegationRules = []Rule{
	{
		ID:     "agl.delegation.attenuates",
		Broken: "refuses a delegation that widens its parent without saying which bound it widens",
		Response: aglWithLearning(aglDropDetail(func(x *Exchange) bool {
			// Delegations of a root grant only: a redelegation is another id's.
			id := strings.TrimSuffix(strings.TrimPrefix(x.Path, aglAPI+"/grants/"), "/delegations")
			return aglDelegation(x) && !aglDelegatedGrant(id, false)
		}, "delegation_widens", "bound")),
	},
	{
		ID:      "agl.delegation.attenuates",
		Variant: "start-ignored",
		Broken:  "ignores the start of validity a delegation asks for: one that would begin before its parent is issued from the parent's start",
		Intercept: func(x *Exchange) *Response {
			if !aglDelegation(x) {
				return nil
			}
			if b := aglDoc(x.Body); b != nil && b["not_before"] != nil {
				delete(b, "not_before")
				x.Body, _ = json.Marshal(b)
			}
			return nil
		},
		Response: aglDlgLearn,
	},
	{
		ID:     "agl.delegation.redelegation-narrows",
		Broken: "holds a redelegation to the root grant's authority, not to the delegate's own grant: it is issued whatever the root holds, and under the root",
		Intercept: func(x *Exchange) *Response {
			if !aglDelegation(x) {
				return nil
			}
			id := strings.TrimSuffix(strings.TrimPrefix(x.Path, aglAPI+"/grants/"), "/delegations")
			aglDlg.Lock()
			root := id
			for i := 0; i < 32 && aglDlg.parent[root] != ""; i++ {
				root = aglDlg.parent[root]
			}
			tok := aglDlg.token[root]
			aglDlg.Unlock()
			if root == id || tok == "" {
				return nil
			}
			return aglAsHost(x, http.MethodPost, aglAPI+"/grants/"+root+"/delegations", tok, x.Body)
		},
		Response: aglDlgLearn,
	},
	{
		ID:     "agl.delegation.same-dispatcher",
		Broken: "dispatches under a delegated grant on a path of its own that does not claim the permit: a second dispatch of a consumed permit under it is sent again",
		Response: aglWithLearning(func(x *Exchange, r *Response) {
			if aglDispatch(x) && aglDelegatedGrant(aglStr(aglDoc(x.Body), "grant_token"), true) {
				aglDispatchAnyway("permit_consumed")(x, r)
			}
		}),
	},
	{
		ID:      "agl.delegation.same-dispatcher",
		Variant: "unaudited",
		Broken:  "does not audit the claims of dispatches under a delegated grant",
		Response: aglWithLearning(aglDropAudit(func(rec map[string]any) bool {
			return aglStr(rec, "event") == "claimed" && aglDelegatedGrant(aglStr(rec, "grant_id"), false)
		})),
	},
	{
		ID:     "agl.delegation.budget-bounded-by-delegator",
		Broken: "counts and checks a use against the grant presented only: a delegate's uses are not spent from its delegator, and a spent delegator does not stop its delegate",
		Response: aglWithLearning(func(x *Exchange, r *Response) {
			if !aglDispatch(x) || aglCode(r) != "grant_uses_exhausted" {
				return
			}
			tok := aglStr(aglDoc(x.Body), "grant_token")
			aglDlg.Lock()
			id := aglDlg.byToken[tok]
			max, bounded := aglDlg.maxUses[id]
			used := aglDlg.direct[tok]
			aglDlg.Unlock()
			if id != "" && (!bounded || used < max) {
				aglDispatchAnyway("grant_uses_exhausted")(x, r)
			}
		}),
	},
	{
		ID:      "agl.delegation.budget-bounded-by-delegator",
		Variant: "bound-unnamed",
		Broken:  "refuses an action under a spent or revoked grant chain without naming the grant or the bound that stopped it",
		Response: aglWithLearning(func(x *Exchange, r *Response) {
			if aglDispatch(x) || aglPropose(x) {
				aglDropDetail(func(*Exchange) bool { return true }, aglCode(r), "bound", "grant_id")(x, r)
			}
		}),
	},
	{
		ID:      "agl.delegation.budget-bounded-by-delegator",
		Variant: "count-ignored",
		Broken:  "ignores the use count a delegation asks for: the delegate gets all its delegator has left",
		Intercept: func(x *Exchange) *Response {
			if !aglDelegation(x) {
				return nil
			}
			if b := aglDoc(x.Body); b != nil && b["max_uses"] != nil {
				delete(b, "max_uses")
				x.Body, _ = json.Marshal(b)
			}
			return nil
		},
		Response: aglDlgLearn,
	},
}

func init() { aglRules = append(aglRules, aglDelegationRules...) }
