package checker

import (
	"encoding/json"
	"fmt"
)

// A small reference interpreter of agl-workflow/1, written apart from the
// checker, for the soundness property: it runs a workflow concretely
// (resources with revisions and states, handle and permit tokens that are
// consumed, proposals that snapshot their arguments), choosing every
// nondeterministic point (a condition, an outcome, an approval, a number of
// loop iterations, an order of parallel branches, a race's winner and how
// far its losers got) from an oracle, and reports the first safety
// violation: a token used after it was consumed, a stale or forged handle or
// permit, a resource in the wrong state, an approval that does not bind the
// action, an effect outside the ceiling, authority the workflow lacks, a
// protected write in a race, a retry that may repeat an uncertain write, or
// a match with no arm for the outcome that happened.

type rkind int

const (
	rValue rkind = iota
	rHandle
	rPermit
	rProposal
	rOutcome
)

type snapEntry struct {
	handle   bool
	res, rev int
	val      string
}

type rv struct {
	k      rkind
	vt     string // value type
	id     string // value identity
	tok    int    // handle or permit token
	res    int
	rev    int
	op     string
	snap   map[string]snapEntry
	open   bool
	tag    string
	class  string
	fields map[string]*rv
	bval   *bool // a literal Bool's value
}

type resource struct {
	kind, state string
	rev         int
	live        int // the token that currently owns it, 0 when none
}

type violation struct{ msg string }

type signal struct {
	ret    bool
	raise  bool
	tag    string
	class  string
	fields map[string]*rv
	// uncertainWrite marks a raise from an uncertain outcome of a
	// non-idempotent external write (a retry must not repeat it).
	uncertainWrite bool
}

type renv struct {
	vars  map[string]*rv
	order []string
}

func (e *renv) clone() *renv {
	o := &renv{vars: map[string]*rv{}, order: append([]string(nil), e.order...)}
	for k, v := range e.vars {
		o.vars[k] = v
	}
	return o
}

func (e *renv) set(n string, v *rv) {
	if _, ok := e.vars[n]; !ok {
		e.order = append(e.order, n)
	}
	e.vars[n] = v
}

func (e *renv) keep() []string { return append([]string(nil), e.order...) }

func (e *renv) drop(keep []string) {
	k := map[string]bool{}
	for _, n := range keep {
		k[n] = true
	}
	var o []string
	for _, n := range e.order {
		if k[n] {
			o = append(o, n)
		} else {
			delete(e.vars, n)
		}
	}
	e.order = o
}

// oracle enumerates every sequence of choices, depth first.
type oracle struct {
	prefix []int
	sizes  []int
	pos    int
}

func (o *oracle) choose(n int) int {
	if n <= 1 {
		return 0
	}
	if o.pos < len(o.prefix) {
		c := o.prefix[o.pos]
		o.sizes = append(o.sizes[:o.pos], n)
		o.pos++
		return c
	}
	o.prefix = append(o.prefix, 0)
	o.sizes = append(o.sizes, n)
	o.pos++
	return 0
}

// next moves to the next unexplored sequence; false when none is left.
func (o *oracle) next() bool {
	for i := len(o.prefix) - 1; i >= 0; i-- {
		if o.prefix[i]+1 < o.sizes[i] {
			o.prefix = append(o.prefix[:i], o.prefix[i]+1)
			o.sizes = o.sizes[:i+1]
			o.pos = 0
			return true
		}
	}
	return false
}

type interp struct {
	wf        *Workflow
	ops       map[string]*Operation
	protos    map[string]*Protocol
	agents    map[string]*Agent
	authority map[string]bool
	ceiling   map[string]bool
	o         *oracle

	res      map[int]*resource
	consumed map[int]bool
	nextTok  int
	nextRes  int
	nextID   int
	race     int
}

// explore runs the workflow along every sequence of choices (at most max
// runs) and returns the first violation found, the number of runs, and
// whether every sequence was explored.
func explore(wf *Workflow, max int) (string, int, bool) {
	o := &oracle{}
	for runs := 1; ; runs++ {
		o.pos = 0
		if v := runOnce(wf, o); v != "" {
			return v, runs, false
		}
		if !o.next() {
			return "", runs, true
		}
		if runs >= max {
			return "", runs, false
		}
	}
}

func runOnce(wf *Workflow, o *oracle) (msg string) {
	in := &interp{wf: wf, o: o, ops: map[string]*Operation{}, protos: map[string]*Protocol{}, agents: map[string]*Agent{},
		authority: map[string]bool{}, ceiling: map[string]bool{}, res: map[int]*resource{}, consumed: map[int]bool{}}
	for _, op := range wf.Operations {
		in.ops[op.Name] = op
	}
	for _, p := range wf.Protocols {
		in.protos[p.Kind] = p
	}
	for _, a := range wf.Agents {
		in.agents[a.Name] = a
	}
	for _, k := range wf.Authority {
		in.authority[k] = true
	}
	for _, k := range wf.EffectCeiling {
		in.ceiling[k] = true
	}
	defer func() {
		if r := recover(); r != nil {
			v, ok := r.(violation)
			if !ok {
				panic(r)
			}
			msg = v.msg
		}
	}()
	e := &renv{vars: map[string]*rv{}}
	for _, p := range wf.Params {
		switch {
		case p.Type.Handle != "":
			e.set(p.Name, in.newHandle(p.Type.Handle, p.State, 0))
		case p.Type.Permit != "":
			snap := map[string]snapEntry{}
			for k, target := range p.Binds {
				h := e.vars[target]
				snap[k] = snapEntry{handle: true, res: h.res, rev: h.rev}
			}
			in.nextTok++
			e.set(p.Name, &rv{k: rPermit, tok: in.nextTok, op: p.Type.Permit, snap: snap, open: true})
		default:
			e.set(p.Name, &rv{k: rValue, vt: p.Type.Value, id: "param:" + p.Name})
		}
	}
	in.stmts(e, wf.Body)
	return ""
}

func (in *interp) fail(format string, a ...any) { panic(violation{fmt.Sprintf(format, a...)}) }

func (in *interp) newHandle(kind, state string, res int) *rv {
	if res == 0 {
		in.nextRes++
		res = in.nextRes
		in.res[res] = &resource{kind: kind, state: state, rev: 1}
	}
	r := in.res[res]
	in.nextTok++
	r.live = in.nextTok
	r.state = state
	return &rv{k: rHandle, tok: in.nextTok, res: res, rev: r.rev}
}

func (in *interp) freshValue(vt string) *rv {
	in.nextID++
	return &rv{k: rValue, vt: vt, id: fmt.Sprintf("rt%d", in.nextID)}
}

func (in *interp) eval(e *renv, x *Expr) *rv {
	if x.Var != "" {
		v, ok := e.vars[x.Var]
		if !ok {
			in.fail("unbound name %s", x.Var)
		}
		return v
	}
	vt := litType(x.Lit)
	v := &rv{k: rValue, vt: vt, id: litIdentity(x.Lit)}
	if vt == "bool" {
		var b bool
		_ = json.Unmarshal(x.Lit, &b)
		v.bval = &b
	}
	return v
}

func (in *interp) stmts(e *renv, ss []*Stmt) *signal {
	for _, s := range ss {
		if sig := in.stmt(e, s); sig != nil {
			return sig
		}
	}
	return nil
}

func (in *interp) block(e *renv, ss []*Stmt) *signal {
	keep := e.keep()
	sig := in.stmts(e, ss)
	e.drop(keep)
	return sig
}

func (in *interp) effects(effects []string, who string, idempotent bool) {
	for _, ef := range effects {
		if !in.ceiling[ef] {
			in.fail("%s performs %s, outside the ceiling", who, ef)
		}
	}
	if in.race > 0 && contains(effects, "external_write") {
		in.fail("%s writes externally inside a race", who)
	}
}

// useHandle checks a handle token for an input.
func (in *interp) useHandle(v *rv, kind string, states []string, what string) *resource {
	if v.k != rHandle {
		in.fail("%s: forged handle (a %d)", what, v.k)
	}
	if in.consumed[v.tok] {
		in.fail("%s: handle used after it was consumed", what)
	}
	r := in.res[v.res]
	if r.kind != kind {
		in.fail("%s: a %s handle where a %s one is needed", what, r.kind, kind)
	}
	if r.rev != v.rev {
		in.fail("%s: stale handle (revision %d, current %d)", what, v.rev, r.rev)
	}
	if r.live != v.tok {
		in.fail("%s: handle no longer owns its resource", what)
	}
	if !contains(states, r.state) {
		in.fail("%s: resource in state %s, needs %v", what, r.state, states)
	}
	return r
}

func (in *interp) consume(tok int) {
	in.consumed[tok] = true
	for _, r := range in.res {
		if r.live == tok {
			r.live = 0
		}
	}
}

func valueOK(param string, v *rv) bool { return v.k == rValue && (param == "data" || param == v.vt) }

// call runs a declared operation and returns the outcome that happened.
func (in *interp) call(e *renv, s *Stmt) *rv {
	op := in.ops[s.Op]
	if op == nil {
		in.fail("unknown operation %s", s.Op)
	}
	for _, k := range op.Authority {
		if !in.authority[k] {
			in.fail("%s needs %s authority", op.Name, k)
		}
	}
	in.effects(op.Effects, op.Name, op.Idempotent)
	for k := range s.Args {
		if inputOf(op, k) == nil {
			in.fail("%s has no input %s", op.Name, k)
		}
	}
	args := map[string]*rv{}
	var toConsume []int
	for _, inp := range op.Inputs {
		x := s.Args[inp.Name]
		if x == nil {
			if !inp.Optional {
				in.fail("%s misses input %s", op.Name, inp.Name)
			}
			continue
		}
		v := in.eval(e, x)
		args[inp.Name] = v
		if inp.Type.Handle != "" {
			in.useHandle(v, inp.Type.Handle, inp.States, op.Name+"."+inp.Name)
			if !inp.Borrow {
				toConsume = append(toConsume, v.tok)
			}
		} else if !valueOK(inp.Type.Value, v) {
			in.fail("%s.%s: wrong value", op.Name, inp.Name)
		}
	}
	seen := map[int]bool{}
	for _, t := range toConsume {
		if seen[t] {
			in.fail("%s: one handle consumed twice", op.Name)
		}
		seen[t] = true
	}
	if s.Permit != nil {
		p := in.eval(e, s.Permit)
		if p.k != rPermit {
			in.fail("%s: forged permit", op.Name)
		}
		if in.consumed[p.tok] {
			in.fail("%s: permit used twice", op.Name)
		}
		if p.op != op.Name {
			in.fail("%s: permit for %s", op.Name, p.op)
		}
		for _, inp := range op.Inputs {
			sn, has := p.snap[inp.Name]
			a := args[inp.Name]
			if inp.Type.Handle != "" {
				if !has {
					continue
				}
				if a == nil || a.res != sn.res {
					in.fail("%s: permit approves another resource", op.Name)
				}
				if in.res[sn.res].rev != sn.rev {
					in.fail("%s: permit approves a stale revision", op.Name)
				}
				continue
			}
			if p.open {
				continue
			}
			if has != (a != nil) || (has && a.id != sn.val) {
				in.fail("%s: input %s differs from the approved proposal", op.Name, inp.Name)
			}
		}
		in.consume(p.tok)
	} else if op.Approval {
		in.fail("%s without a permit", op.Name)
	}
	for _, t := range toConsume {
		in.consume(t)
	}
	o := op.Outcomes[in.o.choose(len(op.Outcomes))]
	out := &rv{k: rOutcome, tag: o.Tag, class: o.Class, fields: map[string]*rv{}}
	for _, f := range o.Fields {
		switch {
		case f.Type.Handle != "" && f.From != "":
			a := args[f.From]
			r := in.res[a.res]
			if f.Revision == "new" {
				r.rev++
			}
			out.fields[f.Name] = in.newHandle(f.Type.Handle, f.State, a.res)
		case f.Type.Handle != "":
			out.fields[f.Name] = in.newHandle(f.Type.Handle, f.State, 0)
		default:
			out.fields[f.Name] = in.freshValue(f.Type.Value)
		}
	}
	if o.Class == ClassUncertain && contains(op.Effects, "external_write") && !op.Idempotent {
		out.class = "uncertain-write"
	}
	return out
}

func (in *interp) requestApproval(e *renv, s *Stmt) *rv {
	in.effects([]string{"human"}, "request_approval", true)
	pr := in.eval(e, s.Proposal)
	if pr.k != rProposal {
		in.fail("request_approval of something that is not a proposal")
	}
	op := in.ops[pr.op]
	granted := in.o.choose(2) == 0
	out := &rv{k: rOutcome, fields: map[string]*rv{}}
	if granted {
		out.tag, out.class = "Granted", ClassSuccess
		in.nextTok++
		out.fields["permit"] = &rv{k: rPermit, tok: in.nextTok, op: pr.op, snap: pr.snap}
	} else {
		out.tag, out.class = "Denied", ClassDenied
		out.fields["reason"] = in.freshValue("string")
	}
	for _, inp := range op.Inputs {
		sn, ok := pr.snap[inp.Name]
		if !ok || !sn.handle {
			continue
		}
		r := in.res[sn.res]
		if r.rev != sn.rev {
			in.fail("request_approval of a stale proposal")
		}
		if r.live == 0 || in.consumed[r.live] {
			in.fail("request_approval: the proposed resource has no live handle")
		}
		p := in.protos[r.kind]
		if r.state != p.Approval.From {
			in.fail("request_approval: resource in state %s", r.state)
		}
		in.consume(r.live)
		st := p.Approval.Denied
		if granted {
			st = p.Approval.Granted
		}
		out.fields[inp.Name] = in.newHandle(r.kind, st, sn.res)
	}
	return out
}

func (in *interp) bindResult(e *renv, s *Stmt, out *rv) *signal {
	if s.Bind == nil {
		return nil
	}
	if s.Bind.Fields == nil {
		e.set(s.Bind.Name, out)
		return nil
	}
	if out.class != ClassSuccess {
		return &signal{raise: true, tag: out.tag, class: out.class, fields: out.fields, uncertainWrite: out.class == "uncertain-write"}
	}
	for f, n := range s.Bind.Fields {
		v, ok := out.fields[f]
		if !ok {
			in.fail("no field %s", f)
		}
		e.set(n, v)
	}
	return nil
}

func (in *interp) stmt(e *renv, s *Stmt) *signal {
	switch s.Kind {
	case KCall:
		return in.bindResult(e, s, in.call(e, s))
	case KRequestApproval:
		return in.bindResult(e, s, in.requestApproval(e, s))
	case KPropose:
		op := in.ops[s.Op]
		if op == nil {
			in.fail("unknown operation %s", s.Op)
		}
		for _, k := range op.Authority {
			if !in.authority[k] {
				in.fail("proposing %s needs %s authority", op.Name, k)
			}
		}
		snap := map[string]snapEntry{}
		for k := range s.Args {
			if inputOf(op, k) == nil {
				in.fail("%s has no input %s", op.Name, k)
			}
		}
		var moved []*resource
		for _, inp := range op.Inputs {
			x := s.Args[inp.Name]
			if x == nil {
				if !inp.Optional {
					in.fail("proposal misses %s", inp.Name)
				}
				continue
			}
			v := in.eval(e, x)
			if inp.Type.Handle != "" {
				p := in.protos[inp.Type.Handle]
				if p.Propose == nil {
					in.fail("no propose transition")
				}
				r := in.useHandle(v, inp.Type.Handle, []string{p.Propose.From}, "propose")
				moved = append(moved, r)
				snap[inp.Name] = snapEntry{handle: true, res: v.res, rev: v.rev}
				continue
			}
			if !valueOK(inp.Type.Value, v) {
				in.fail("proposal: wrong value for %s", inp.Name)
			}
			snap[inp.Name] = snapEntry{val: v.id}
		}
		for _, r := range moved {
			r.state = in.protos[r.kind].Propose.To
		}
		if s.Bind != nil {
			e.set(s.Bind.Name, &rv{k: rProposal, op: op.Name, snap: snap})
		}
	case KLet:
		e.set(s.Bind.Name, in.eval(e, s.Value))
	case KIf:
		c := in.eval(e, s.Cond)
		if c.k != rValue || c.vt != "bool" {
			in.fail("condition is not a Bool")
		}
		then := true
		if c.bval != nil {
			then = *c.bval
		} else {
			then = in.o.choose(2) == 0
		}
		if then {
			return in.block(e, s.Then)
		}
		return in.block(e, s.Else)
	case KMatch:
		v := in.eval(e, s.On)
		if v.k != rOutcome {
			in.fail("match on something that is not an outcome")
		}
		for _, a := range s.Arms {
			if a.Tag != v.tag {
				continue
			}
			keep := e.keep()
			for f, n := range a.Bind {
				fv, ok := v.fields[f]
				if !ok {
					in.fail("no field %s", f)
				}
				e.set(n, fv)
			}
			sig := in.block(e, a.Body)
			e.drop(keep)
			return sig
		}
		in.fail("no arm for %s", v.tag)
	case KLoop:
		if s.Over != nil {
			if v := in.eval(e, s.Over); v.k != rValue || v.vt != "list" {
				in.fail("loop over something that is not a list")
			}
		}
		n := in.o.choose(3)
		for i := 0; i < n; i++ {
			keep := e.keep()
			if s.Over != nil {
				e.set(s.Item, in.freshValue("data"))
			}
			sig := in.block(e, s.Body)
			e.drop(keep)
			if sig != nil {
				return sig
			}
		}
	case KRetry:
		for attempt := 1; ; attempt++ {
			sig := in.block(e, s.Body)
			if sig == nil || sig.ret || attempt >= s.Attempts {
				return sig
			}
			if sig.uncertainWrite {
				in.fail("retry repeats a write that may already have happened")
			}
		}
	case KTry:
		sig := in.block(e, s.Body)
		if sig == nil || sig.ret {
			return sig
		}
		for _, a := range s.Catch {
			if a.Tag != sig.tag {
				continue
			}
			keep := e.keep()
			for f, n := range a.Bind {
				fv, ok := sig.fields[f]
				if !ok {
					in.fail("no field %s", f)
				}
				e.set(n, fv)
			}
			s2 := in.block(e, a.Body)
			e.drop(keep)
			return s2
		}
		return sig
	case KFallback:
		var out *rv
		if s.Primary.Kind == KCall {
			out = in.call(e, s.Primary)
		} else {
			out = in.requestApproval(e, s.Primary)
		}
		if out.class == ClassSuccess {
			v, ok := out.fields[s.Field]
			if !ok {
				in.fail("no field %s", s.Field)
			}
			e.set(s.Bind.Name, v)
		} else {
			e.set(s.Bind.Name, in.eval(e, s.Otherwise))
		}
	case KParallel:
		order := in.permutation(len(s.Branches))
		for _, i := range order {
			if sig := in.block(e, s.Branches[i].Body); sig != nil {
				return sig
			}
		}
	case KRace:
		w := in.o.choose(len(s.Branches))
		in.race++
		for i, b := range s.Branches {
			if i == w {
				continue
			}
			cut := in.o.choose(len(b.Body) + 1)
			le := e.clone()
			in.stmts(le, b.Body[:cut])
		}
		sig := in.block(e, s.Branches[w].Body)
		in.race--
		return sig
	case KParallelMap:
		if v := in.eval(e, s.Over); v.k != rValue || v.vt != "list" {
			in.fail("parallel map over something that is not a list")
		}
		n := in.o.choose(3)
		for i := 0; i < n; i++ {
			keep := e.keep()
			e.set(s.Item, in.freshValue("data"))
			sig := in.block(e, s.Body)
			e.drop(keep)
			if sig != nil {
				return sig
			}
		}
	case KAgent:
		a := in.agents[s.Agent]
		if a == nil {
			in.fail("unknown agent")
		}
		for _, t := range a.Tools {
			op := in.ops[t]
			in.effects(op.Effects, "agent "+a.Name+" via "+t, op.Idempotent)
		}
		for _, x := range s.Input {
			in.eval(e, x)
		}
		if s.Bind != nil {
			e.set(s.Bind.Name, in.freshValue("data"))
		}
	case KReturn:
		if s.Value != nil {
			in.eval(e, s.Value)
		}
		return &signal{ret: true}
	}
	return nil
}

func (in *interp) permutation(n int) []int {
	rest := make([]int, n)
	for i := range rest {
		rest[i] = i
	}
	var out []int
	for len(rest) > 0 {
		k := in.o.choose(len(rest))
		out = append(out, rest[k])
		rest = append(rest[:k:k], rest[k+1:]...)
	}
	return out
}
