package sabotage

import (
	"bytes"
	"encoding/json"
	"strings"
	"sync"

	agtp "github.com/parley-conformance/parley/wire/agtp"
)

// Hosts broken for the AGTP contracts model (agtp.model.contracts): each
// misbehaves only after an order of operations no hand-written scenario
// takes.

// issuedSid is the contract an answer issues or is served under: a 461's
// synthesis_id (flat or under result), a success's Contract-Synthesized.
func issuedSid(r *agtp.Response) string {
	if r.Status == 461 {
		doc := agtpJSON(r)
		if res, ok := doc["result"].(map[string]any); ok {
			if sid, _ := res["synthesis_id"].(string); sid != "" {
				return sid
			}
		}
		sid, _ := doc["synthesis_id"].(string)
		return sid
	}
	if r.Status >= 200 && r.Status < 300 {
		return r.Header.Get("Contract-Synthesized")
	}
	return ""
}

// revokeTakesAll is a host whose operator revocation of one contract
// revokes every other contract its originator holds too.
func revokeTakesAll() Rule {
	var mu sync.Mutex
	held := map[string][]string{} // Agent-ID -> the contracts issued to it, in order
	owners := map[string]string{} // synthesis_id -> Agent-ID
	return Rule{
		AGTP: func(x *AGTPExchange, r *agtp.Response) {
			if isAction(x) && presents(x) == "" {
				if sid := issuedSid(r); sid != "" {
					agent := x.Request.Header.Get("Agent-ID")
					mu.Lock()
					if _, known := owners[sid]; !known {
						owners[sid] = agent
						held[agent] = append(held[agent], sid)
					}
					mu.Unlock()
				}
				return
			}
			if !isFloor(x, "REVOKE", "contract") || r.Status < 200 || r.Status > 299 {
				return
			}
			sid, _ := x.Params()["synthesis_id"].(string)
			mu.Lock()
			others := []string{}
			for _, s := range held[owners[sid]] {
				if s != sid {
					others = append(others, s)
				}
			}
			mu.Unlock()
			for _, s := range others {
				body, _ := json.Marshal(map[string]any{"method": "REVOKE", "parameters": map[string]any{"target": "contract", "synthesis_id": s, "reason": "sabotage"}})
				req, err := agtp.NewRequest("REVOKE", "/", body)
				if err != nil {
					continue
				}
				for _, h := range []string{"Agent-ID", "Content-Type", "Authority-Scope"} {
					if v := x.Request.Header.Get(h); v != "" {
						req.Header.Set(h, v)
					}
				}
				_, _ = x.Upstream(req)
			}
		},
	}
}

// releasedIDReissued is a host that recycles contract ids: the first
// contract an agent obtains after releasing one (SUSPEND) is issued under
// the released synthesis_id, and presenting that id reaches the new
// contract.
func releasedIDReissued() Rule {
	var mu sync.Mutex
	released := map[string]string{} // Agent-ID -> the synthesis_id it released last
	alias := map[string]string{}    // the recycled id -> the host's id of the new contract
	host := map[string]string{}     // the host's id -> the recycled id
	return Rule{
		AGTPRequest: func(x *AGTPExchange) *agtp.Response {
			mu.Lock()
			defer mu.Unlock()
			if sid := presents(x); sid != "" {
				if real, ok := alias[sid]; ok {
					x.Request.Header.Set("Contract-Synthesized", real)
				}
			}
			if sid, _ := x.Params()["synthesis_id"].(string); sid != "" {
				if real, ok := alias[sid]; ok {
					x.SetParam("synthesis_id", real)
				}
			}
			return nil
		},
		AGTP: func(x *AGTPExchange, r *agtp.Response) {
			mu.Lock()
			defer mu.Unlock()
			agent := x.Request.Header.Get("Agent-ID")
			if x.Request.Method == "SUSPEND" && r.Status >= 200 && r.Status < 300 {
				if sid, _ := x.Params()["synthesis_id"].(string); sid != "" {
					if old, ok := host[sid]; ok {
						sid = old
					}
					released[agent] = sid
				}
			}
			if isAction(x) && presents(x) == "" {
				if sid := issuedSid(r); sid != "" && released[agent] != "" && host[sid] == "" {
					if _, recycled := alias[released[agent]]; !recycled {
						old := released[agent]
						delete(released, agent)
						alias[old], host[sid] = sid, old
					}
				}
			}
			for real, old := range host {
				if bytes.Contains(r.Body, []byte(real)) {
					r.Body = bytes.ReplaceAll(r.Body, []byte(real), []byte(old))
				}
				if r.Header.Get("Contract-Synthesized") == real {
					r.Header.Set("Contract-Synthesized", old)
				}
				if strings.Contains(r.Header.Get("Attribution-Record"), ".") {
					editAttribution(r, func(p map[string]any) {
						if p["synthesis_id"] == real {
							p["synthesis_id"] = old
						}
					})
				}
			}
		},
	}
}

func init() {
	const id = "agtp.model.contracts"
	agtpRules = append(agtpRules,
		withID(revokeTakesAll(), id, "revoke-takes-all",
			"revoking one contract (REVOKE target=contract) revokes every other contract its originator holds too"),
		withID(releasedIDReissued(), id, "released-id-reissued",
			"recycles contract ids: the first contract an agent obtains after a release is issued under the released synthesis_id"),
	)
	agtpRules = append(agtpRules, withID(cachePerConnection(), "agtp.model.idempotent-retries", "cache-per-connection",
		"scopes its idempotency cache by connection as well as by (Agent-ID, Idempotency-Key): the same agent's key replayed on another connection is executed again under a new contract"))
}

// cachePerConnection is a host whose idempotency cache is keyed by the
// connection too (a cache kept with the session, not with the agent): a
// replay on the connection of the first request gets the cached response,
// the same agent's same key on another connection is a new request. It is
// emulated by adding the suite connection's name to the key on the way to
// the host. Every hand-written scenario replays on its one connection, so
// only requests of one key over several connections show it.
func cachePerConnection() Rule {
	return Rule{
		AGTPRequest: func(x *AGTPExchange) *agtp.Response {
			if k := x.Request.Header.Get("Idempotency-Key"); k != "" {
				x.Request.Header.Set("Idempotency-Key", k+"-conn-"+x.Conn)
			}
			return nil
		},
	}
}
