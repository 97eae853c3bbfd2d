package checker

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/parley-conformance/parley/scenarios/agl-checker/notation"
)

// TestCheckerIsSound is the soundness property of the judgment: random
// well-formed workflows over the standard email declarations (valid and
// invalid alike) are checked, and every one the checker accepts is run by
// the reference interpreter along every sequence of choices; none may reach
// a violation (a double consumption, a stale or forged handle or permit, a
// state mismatch, an unbound approval, an effect or authority outside the
// workflow's, a protected write in a race, an unsafe retry, a stuck match).
// It also counts the valid workflows the checker rejects: those the
// interpreter ran to completion on every path without a violation. The
// proposal asks to measure rejected valid workflows; the test reports them
// by diagnostic code.
//
// PARLEY_CHECKER_PROPERTY_N sets how many workflows (default 2000),
// PARLEY_CHECKER_PROPERTY_SEED the seed (default 1).
func TestCheckerIsSound(t *testing.T) {
	n := envInt("PARLEY_CHECKER_PROPERTY_N", 2000)
	if testing.Short() {
		n = 300
	}
	seed := uint64(envInt("PARLEY_CHECKER_PROPERTY_SEED", 1))
	decls := preludeDecls(t)
	r := rand.New(rand.NewPCG(seed, 0xa61))
	var accepted, rejected, invalid, rejectedValid, inconclusive int
	codes := map[string]int{}
	for i := 0; i < n; i++ {
		wf := generate(r, decls, i)
		raw, err := json.Marshal(wf)
		if err != nil {
			t.Fatal(err)
		}
		wf2, err := Decode(raw)
		if err != nil {
			t.Fatalf("workflow %d is not well formed: %v\n%s", i, err, raw)
		}
		res := Check(wf2)
		if again := Check(wf2); !reflect.DeepEqual(res, again) {
			t.Fatalf("workflow %d: two checks disagree", i)
		}
		v, _, complete := explore(wf2, 3000)
		switch {
		case res.OK():
			accepted++
			if v != "" {
				t.Errorf("UNSOUND: workflow %d checks, yet a run reaches a violation: %s\n%s", i, v, indent(raw))
				if dir := os.Getenv("PARLEY_CHECKER_DUMP_DIR"); dir != "" {
					_ = os.WriteFile(fmt.Sprintf("%s/unsound-%d.json", dir, i), []byte(indent(raw)), 0o644)
				}
			}
		case v != "":
			rejected++
			invalid++
		case complete:
			rejected++
			rejectedValid++
			seen := map[string]bool{}
			for _, d := range res.Diagnostics {
				if !seen[d.Code] {
					seen[d.Code] = true
					codes[d.Code]++
				}
			}
		default:
			rejected++
			inconclusive++
		}
	}
	var byCode []string
	for _, c := range sortedKeys(codes) {
		byCode = append(byCode, fmt.Sprintf("%s %d", c, codes[c]))
	}
	t.Logf("seed %d: %d random workflows: %d accepted, every one ran without a violation on every explored path; %d rejected: %d reach a violation at run time, %d are valid at run time (every path explored, no violation) yet rejected (%.1f%% of the %d valid ones), %d not fully explored. Rejected valid workflows by code: %s",
		seed, n, accepted, rejected, invalid, rejectedValid, pct(rejectedValid, accepted+rejectedValid), accepted+rejectedValid, inconclusive, strings.Join(byCode, ", "))
	if accepted < n/10 {
		t.Errorf("only %d of %d workflows were accepted: the generator no longer exercises the checker's acceptance", accepted, n)
	}
	if invalid < n/10 {
		t.Errorf("only %d of %d workflows reach a violation: the generator no longer exercises rejection", invalid, n)
	}
}

func pct(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return 100 * float64(a) / float64(b)
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func indent(raw []byte) string {
	var v any
	_ = json.Unmarshal(raw, &v)
	b, _ := json.MarshalIndent(v, "", " ")
	return string(b)
}

type decls struct {
	Protocols  []*Protocol  `json:"protocols"`
	Operations []*Operation `json:"operations"`
	Agents     []*Agent     `json:"agents"`
}

func preludeDecls(t *testing.T) decls {
	var d decls
	if err := json.Unmarshal(notation.EmailPrelude(), &d); err != nil {
		t.Fatal(err)
	}
	sp := &Span{1, 1, 1, 10}
	for _, p := range d.Protocols {
		p.Span = sp
	}
	for _, o := range d.Operations {
		o.Span = sp
	}
	for _, a := range d.Agents {
		a.Span = sp
	}
	return d
}

// gen builds one random workflow: sensible shapes (the approval flow, a
// send matched or caught, edits, loops, parallel scopes), with names picked
// at random among those it has bound (so that some uses are wrong).
type gen struct {
	r      *rand.Rand
	line   int
	budget int
	names  int
	pool   map[string][]string // by sort: handle, permit, proposal, bool, value, list, outcome
	all    []string
}

func generate(r *rand.Rand, d decls, i int) *Workflow {
	g := &gen{r: r, budget: 4 + r.IntN(12), pool: map[string][]string{}}
	wf := &Workflow{IRVersion: IRVersion, Name: fmt.Sprintf("random-%d", i), Protocols: d.Protocols, Operations: d.Operations, Agents: d.Agents}
	wf.Authority = []string{"mailbox", "account"}
	if r.IntN(12) == 0 {
		wf.Authority = wf.Authority[1+r.IntN(2):]
	}
	wf.EffectCeiling = []string{"external_write", "email_send", "human", "network_read", "financial_write"}
	if r.IntN(8) == 0 {
		wf.EffectCeiling = wf.EffectCeiling[1+r.IntN(3):]
	}
	addParam := func(name string, t Type, state string, binds map[string]string) {
		wf.Params = append(wf.Params, &Param{Name: name, Type: t, State: state, Binds: binds, Span: g.span()})
	}
	for k := 0; k < 1+r.IntN(2); k++ {
		name := fmt.Sprintf("d%d", k)
		state := "Draft"
		if r.IntN(3) == 0 {
			state = "Authorized"
		}
		addParam(name, Type{Handle: "email_draft"}, state, nil)
		g.add("handle", name)
		if state == "Authorized" && r.IntN(2) == 0 {
			addParam("p"+name, Type{Permit: "mail.send_email"}, "", map[string]string{"draft": name})
			g.add("permit", "p"+name)
		}
	}
	addParam("flag", Type{Value: "bool"}, "", nil)
	g.add("bool", "flag")
	addParam("items", Type{Value: "list"}, "", nil)
	g.add("list", "items")
	addParam("topic", Type{Value: "string"}, "", nil)
	g.add("value", "topic")
	wf.Body = g.block(0)
	wf.Span = &Span{1, 1, g.line + 1, 1}
	return wf
}

func (g *gen) span() *Span { g.line++; return &Span{g.line, 1, g.line, 40} }

func (g *gen) add(sort, name string) {
	g.pool[sort] = append(g.pool[sort], name)
	g.all = append(g.all, name)
}

func (g *gen) fresh(prefix string) string { g.names++; return fmt.Sprintf("%s%d", prefix, g.names) }

// pick returns a name of the wanted sort most of the time, any name
// sometimes, and rarely one never bound.
func (g *gen) pick(sort string) string {
	x := g.r.IntN(100)
	switch {
	case x < 85 && len(g.pool[sort]) > 0:
		p := g.pool[sort]
		return p[g.r.IntN(len(p))]
	case x < 98 && len(g.all) > 0:
		return g.all[g.r.IntN(len(g.all))]
	}
	return "ghost"
}

func v(name string) *Expr { return &Expr{Var: name} }
func lit(v string) *Expr  { return &Expr{Lit: json.RawMessage(strconv.Quote(v))} }
func args(kv ...any) map[string]*Expr {
	m := map[string]*Expr{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1].(*Expr)
	}
	return m
}

func (g *gen) block(depth int) []*Stmt {
	n := 1 + g.r.IntN(3)
	var out []*Stmt
	for i := 0; i < n && g.budget > 0; i++ {
		out = append(out, g.stmt(depth)...)
	}
	if len(out) == 0 {
		out = append(out, &Stmt{Kind: KCall, Span: g.span(), Op: "log.note", Args: args("text", lit("idle"))})
	}
	return out
}

func (g *gen) stmt(depth int) []*Stmt {
	g.budget--
	deep := depth < 3
	switch k := g.r.IntN(32); {
	case k < 4:
		return g.approvalFlow(depth)
	case k < 7:
		return g.sendFlow(depth, g.pick("handle"), g.pick("permit"))
	case k < 9:
		h := g.pick("handle")
		to := h
		if g.r.IntN(3) == 0 {
			to = g.fresh("e")
		}
		g.add("handle", to)
		return []*Stmt{{Kind: KCall, Span: g.span(), Op: "mail.edit_draft", Args: args("draft", v(h), "body", lit("v")), Bind: &Bind{Fields: map[string]string{"draft": to}}}}
	case k < 10:
		return []*Stmt{{Kind: KCall, Span: g.span(), Op: "mail.read_draft", Args: args("draft", v(g.pick("handle"))), Bind: &Bind{Name: g.fresh("r")}}}
	case k < 11:
		return []*Stmt{{Kind: KCall, Span: g.span(), Op: "mail.discard", Args: args("draft", v(g.pick("handle")))}}
	case k < 12:
		nd := g.fresh("n")
		g.add("handle", nd)
		return []*Stmt{{Kind: KCall, Span: g.span(), Op: "mail.create_draft", Args: args("to", v(g.pick("value")), "body", lit("b")), Bind: &Bind{Fields: map[string]string{"draft": nd}}}}
	case k < 13:
		pr := g.fresh("pr")
		g.add("proposal", pr)
		return []*Stmt{{Kind: KPropose, Span: g.span(), Op: "mail.send_email", Args: args("draft", v(g.pick("handle"))), Bind: &Bind{Name: pr}}}
	case k < 14:
		b := g.fresh("ok")
		g.add("bool", b)
		return []*Stmt{{Kind: KCall, Span: g.span(), Op: "legacy.approve", Args: args("question", lit("?")), Bind: &Bind{Fields: map[string]string{"ok": b}}}}
	case k < 16 && deep:
		return []*Stmt{{Kind: KIf, Span: g.span(), Cond: v(g.pick("bool")), Then: g.block(depth + 1), Else: g.block(depth + 1)}}
	case k < 18 && deep:
		item := g.fresh("it")
		return []*Stmt{{Kind: KLoop, Span: g.span(), Over: v(g.pick("list")), Item: item, Body: g.block(depth + 1)}}
	case k < 20 && deep:
		kind := KParallel
		if g.r.IntN(3) == 0 {
			kind = KRace
		}
		return []*Stmt{{Kind: kind, Span: g.span(), Branches: []*Branch{{Span: g.span(), Body: g.block(depth + 1)}, {Span: g.span(), Body: g.block(depth + 1)}}}}
	case k < 21 && deep:
		return []*Stmt{{Kind: KParallelMap, Span: g.span(), Over: v(g.pick("list")), Item: g.fresh("it"), Body: g.block(depth + 1)}}
	case k < 22 && g.r.IntN(6) == 0:
		// Rarer shapes: a loop without a list, a typed let, a match on a value.
		switch g.r.IntN(3) {
		case 0:
			if deep {
				return []*Stmt{{Kind: KLoop, Span: g.span(), Body: g.block(depth + 1)}}
			}
		case 1:
			x := g.fresh("t")
			g.add("handle", x)
			return []*Stmt{{Kind: KLet, Span: g.span(), Bind: &Bind{Name: x}, Type: &Type{Handle: "email_draft"}, Value: v(g.pick("handle"))}}
		}
		return []*Stmt{{Kind: KMatch, Span: g.span(), On: v(g.pick("value")), Arms: []*Arm{{Tag: "Granted", Span: g.span(), Bind: map[string]string{"permit": g.fresh("p")}, Body: g.note()}}}}
	case k < 22:
		from := g.pick("permit")
		to := g.fresh("q")
		g.add("permit", to)
		return []*Stmt{{Kind: KLet, Span: g.span(), Bind: &Bind{Name: to}, Value: v(from)}}
	case k < 23:
		x := g.fresh("x")
		g.add("value", x)
		return []*Stmt{{Kind: KFallback, Span: g.span(), Bind: &Bind{Name: x}, Field: "message_id",
			Primary: &Stmt{Kind: KCall, Span: g.span(), Op: "mail.send_email", Args: args("draft", v(g.pick("handle"))), Permit: v(g.pick("permit"))}, Otherwise: lit("none")}}
	case k < 24:
		agent := []string{"researcher", "assistant", "clerk"}[g.r.IntN(3)]
		out := g.fresh("m")
		g.add("value", out)
		return []*Stmt{{Kind: KAgent, Span: g.span(), Agent: agent, Input: []*Expr{v(g.pick("value"))}, Bind: &Bind{Name: out}}}
	case k < 25 && deep:
		op, fail := "kv.put", "Failed"
		if g.r.IntN(2) == 0 {
			op = "webhook.post"
		}
		a := args("key", lit("k"), "value", lit("v"))
		if op == "webhook.post" {
			a = args("url", lit("u"), "payload", lit("v"))
		}
		body := []*Stmt{{Kind: KCall, Span: g.span(), Op: op, Args: a, Bind: &Bind{Fields: map[string]string{}}}}
		if g.r.IntN(3) == 0 {
			body = append(body, g.block(depth+2)...)
		}
		return []*Stmt{{Kind: KTry, Span: g.span(), Body: []*Stmt{{Kind: KRetry, Span: g.span(), Attempts: 2, Body: body}},
			Catch: []*Arm{{Tag: fail, Span: g.span(), Body: []*Stmt{{Kind: KCall, Span: g.span(), Op: "log.note", Args: args("text", lit("gave up"))}}}}}}
	case k < 26:
		h := g.pick("handle")
		rc := g.fresh("rc")
		return []*Stmt{{Kind: KCall, Span: g.span(), Op: "mail.reconcile", Args: args("draft", v(h)), Bind: &Bind{Name: rc}},
			{Kind: KMatch, Span: g.span(), On: v(rc), Arms: []*Arm{
				{Tag: "Sent", Span: g.span(), Bind: map[string]string{"draft": h}, Body: g.note()},
				{Tag: "FailedNoEffect", Span: g.span(), Bind: map[string]string{"draft": h}, Body: g.note()}}}}
	case k < 27 && depth > 0 && g.r.IntN(2) == 0:
		return []*Stmt{{Kind: KReturn, Span: g.span()}}
	case k < 28:
		return []*Stmt{{Kind: KCall, Span: g.span(), Op: "web.search", Args: args("query", v(g.pick("value"))), Bind: &Bind{Name: g.fresh("s")}}}
	case k < 29:
		return g.transferFlow(depth)
	case k < 30 && deep:
		return g.caughtApproval(depth)
	}
	return []*Stmt{{Kind: KCall, Span: g.span(), Op: "log.note", Args: args("text", v(g.pick("value")))}}
}

func (g *gen) note() []*Stmt {
	return []*Stmt{{Kind: KCall, Span: g.span(), Op: "log.note", Args: args("text", lit("n"))}}
}

// approvalFlow: propose, request approval, match the decision.
func (g *gen) approvalFlow(depth int) []*Stmt {
	h := g.pick("handle")
	pr, dec := g.fresh("pr"), g.fresh("dec")
	g.add("proposal", pr)
	p := g.fresh("p")
	hb := h
	if g.r.IntN(4) == 0 {
		hb = g.fresh("a")
	}
	g.add("handle", hb)
	g.add("permit", p)
	var granted []*Stmt
	if depth < 3 && g.r.IntN(4) != 0 {
		granted = g.sendFlow(depth+1, hb, p)
	} else {
		granted = g.block(depth + 1)
	}
	arms := []*Arm{{Tag: "Granted", Span: g.span(), Bind: map[string]string{"permit": p, "draft": hb}, Body: granted}}
	if g.r.IntN(8) != 0 {
		var denied []*Stmt
		switch g.r.IntN(3) {
		case 0:
			denied = []*Stmt{{Kind: KCall, Span: g.span(), Op: "mail.discard", Args: args("draft", v(hb))}}
		case 1:
			denied = []*Stmt{{Kind: KReturn, Span: g.span()}}
		default:
			denied = g.note()
		}
		arms = append(arms, &Arm{Tag: "Denied", Span: g.span(), Bind: map[string]string{"draft": hb}, Body: denied})
	}
	out := []*Stmt{}
	if g.r.IntN(6) != 0 {
		out = append(out, &Stmt{Kind: KPropose, Span: g.span(), Op: "mail.send_email", Args: args("draft", v(h)), Bind: &Bind{Name: pr}})
	}
	if g.r.IntN(5) == 0 {
		out = append(out, g.stmt(depth)...)
	}
	out = append(out, &Stmt{Kind: KRequestApproval, Span: g.span(), Proposal: v(pr), Bind: &Bind{Name: dec}},
		&Stmt{Kind: KMatch, Span: g.span(), On: v(dec), Arms: arms})
	return out
}

// transferFlow: propose a transfer of values, approve it, dispatch it
// (sometimes with an argument changed).
func (g *gen) transferFlow(depth int) []*Stmt {
	pr, dec, p := g.fresh("pr"), g.fresh("dec"), g.fresh("p")
	g.add("proposal", pr)
	g.add("permit", p)
	amount := &Expr{Lit: json.RawMessage("1500")}
	a := func() map[string]*Expr {
		return args("account", v(g.pick("value")), "recipient", lit("DE89"), "amount", amount)
	}
	pa := a()
	da := pa
	if g.r.IntN(3) == 0 {
		da = a()
	}
	disp := []*Stmt{{Kind: KCall, Span: g.span(), Op: "ledger.transfer", Args: da, Permit: v(p), Bind: &Bind{Name: g.fresh("done")}}}
	if depth < 3 && g.r.IntN(4) == 0 {
		disp = append(disp, g.block(depth+1)...)
	}
	return []*Stmt{
		{Kind: KPropose, Span: g.span(), Op: "ledger.transfer", Args: pa, Bind: &Bind{Name: pr}},
		{Kind: KRequestApproval, Span: g.span(), Proposal: v(pr), Bind: &Bind{Name: dec}},
		{Kind: KMatch, Span: g.span(), On: v(dec), Arms: []*Arm{
			{Tag: "Granted", Span: g.span(), Bind: map[string]string{"permit": p}, Body: disp},
			{Tag: "Denied", Span: g.span(), Body: g.note()}}},
	}
}

// caughtApproval: the approval's fields bound directly, Denied caught.
func (g *gen) caughtApproval(depth int) []*Stmt {
	h := g.pick("handle")
	pr, p := g.fresh("pr"), g.fresh("p")
	g.add("proposal", pr)
	g.add("permit", p)
	body := []*Stmt{{Kind: KRequestApproval, Span: g.span(), Proposal: v(pr), Bind: &Bind{Fields: map[string]string{"permit": p, "draft": h}}}}
	if g.r.IntN(2) == 0 {
		body = append(body, g.sendFlow(depth+1, h, p)...)
	} else {
		body = append(body, g.block(depth+1)...)
	}
	return []*Stmt{
		{Kind: KPropose, Span: g.span(), Op: "mail.send_email", Args: args("draft", v(h)), Bind: &Bind{Name: pr}},
		{Kind: KTry, Span: g.span(), Body: body, Catch: []*Arm{{Tag: "Denied", Span: g.span(), Bind: map[string]string{"draft": h}, Body: g.block(depth + 1)}}},
	}
}

// sendFlow: a send, matched or caught.
func (g *gen) sendFlow(depth int, h, p string) []*Stmt {
	deep := depth < 3
	body := func() []*Stmt {
		if deep && g.r.IntN(3) == 0 {
			return g.block(depth + 1)
		}
		return g.note()
	}
	after := func(state string) []*Stmt {
		switch {
		case state == "FailedNoEffect" && g.r.IntN(2) == 0:
			return []*Stmt{{Kind: KCall, Span: g.span(), Op: "mail.discard", Args: args("draft", v(h))}}
		case state == "Unknown" && g.r.IntN(2) == 0:
			return []*Stmt{{Kind: KCall, Span: g.span(), Op: "mail.reconcile", Args: args("draft", v(h)), Bind: &Bind{Name: g.fresh("rc")}}}
		}
		return body()
	}
	tags := []string{"Sent", "FailedNoEffect", "Unknown"}
	drop := -1
	if g.r.IntN(8) == 0 {
		drop = g.r.IntN(3)
	}
	hb := h
	if g.r.IntN(5) == 0 {
		hb = g.fresh("b")
		g.add("handle", hb)
	}
	if g.r.IntN(3) == 0 {
		var catches []*Arm
		for i, t := range tags[1:] {
			if i+1 == drop {
				continue
			}
			catches = append(catches, &Arm{Tag: t, Span: g.span(), Bind: map[string]string{"draft": hb}, Body: after(t)})
		}
		return []*Stmt{{Kind: KTry, Span: g.span(), Catch: catches, Body: append([]*Stmt{{Kind: KCall, Span: g.span(), Op: "mail.send_email",
			Args: args("draft", v(h)), Permit: v(p), Bind: &Bind{Fields: map[string]string{"draft": hb}}}}, body()...)}}
	}
	s := g.fresh("sent")
	var arms []*Arm
	for i, t := range tags {
		if i == drop {
			continue
		}
		arms = append(arms, &Arm{Tag: t, Span: g.span(), Bind: map[string]string{"draft": hb}, Body: after(t)})
	}
	return []*Stmt{{Kind: KCall, Span: g.span(), Op: "mail.send_email", Args: args("draft", v(h)), Permit: v(p), Bind: &Bind{Name: s}},
		{Kind: KMatch, Span: g.span(), On: v(s), Arms: arms}}
}
