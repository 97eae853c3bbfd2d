package checker

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// Resource is an owned handle or an affine permit available after the
// workflow: Δ' in the judgment.
type Resource struct {
	Name      string `json:"name"`
	Type      string `json:"type"` // "handle" or "permit"
	Kind      string `json:"kind,omitempty"`
	State     string `json:"state,omitempty"`
	Operation string `json:"operation,omitempty"`
}

// Result is what the checker concluded: diagnostics, or (when there are
// none) the effect upper bound and the resources available after.
type Result struct {
	Diagnostics    []Diagnostic
	EffectBound    []string
	ResourcesAfter []Resource
}

// OK reports whether the workflow checked.
func (r *Result) OK() bool { return len(r.Diagnostics) == 0 }

// Check runs the judgment over a decoded workflow. It is deterministic: the
// same workflow always yields the same result, diagnostics in the same order.
func Check(wf *Workflow) *Result {
	c := &checker{wf: wf, effects: map[string]bool{}}
	c.declarations()
	e := c.params()
	c.stmts(e, wf.Body)
	if e.live {
		c.exits = append(c.exits, e)
	}
	res := &Result{Diagnostics: sortDiagnostics(c.diags), EffectBound: []string{}, ResourcesAfter: []Resource{}}
	if !res.OK() {
		res.Diagnostics = append([]Diagnostic(nil), res.Diagnostics...)
		return res
	}
	res.Diagnostics = []Diagnostic{}
	res.EffectBound = sortedKeys(c.effects)
	if len(c.exits) > 0 {
		out := c.join(c.exits, c.exits[0].names(), *wf.Span)
		for _, n := range out.order {
			b := out.vars[n]
			if b.st != avail {
				continue
			}
			switch b.v.k {
			case vHandle:
				res.ResourcesAfter = append(res.ResourcesAfter, Resource{Name: n, Type: "handle", Kind: b.v.kind, State: b.v.state})
			case vPermit:
				res.ResourcesAfter = append(res.ResourcesAfter, Resource{Name: n, Type: "permit", Operation: b.v.op})
			}
		}
	}
	sort.Slice(res.ResourcesAfter, func(i, j int) bool { return res.ResourcesAfter[i].Name < res.ResourcesAfter[j].Name })
	return res
}

// --- the abstract domain ---------------------------------------------------

type vkind int

const (
	vValue vkind = iota
	vHandle
	vPermit
	vProposal
	vOutcome
	vErr // a value an earlier diagnostic already concerns; its uses are silent
)

// dep is what a proposal or permit binds for one operation input: a handle
// revision, or the identity of a value.
type dep struct {
	handle   bool
	kind     string
	res, rev int
	val      string
}

// val is an abstract value. Values are never changed in place.
type val struct {
	k        vkind
	vt       string // value type
	vid      string // value identity: equal identities are the same value
	kind     string // handle kind
	state    string
	res, rev int
	op       string         // permit, proposal
	deps     map[string]dep // permit, proposal
	open     bool           // a permit param: its value inputs were approved outside the workflow
	tags     []*tagVal      // outcome
	origin   Span
}

type tagVal struct {
	tag, class string
	fields     []fieldVal
}

type fieldVal struct {
	name string
	v    *val
}

func (t *tagVal) field(name string) *val {
	for _, f := range t.fields {
		if f.name == name {
			return f.v
		}
	}
	return nil
}

func (v *val) tag(name string) *tagVal {
	for _, t := range v.tags {
		if t.tag == name {
			return t
		}
	}
	return nil
}

var errVal = &val{k: vErr}

func (v *val) affine() bool {
	switch v.k {
	case vHandle, vPermit:
		return true
	case vOutcome:
		for _, t := range v.tags {
			for _, f := range t.fields {
				if f.v.affine() {
					return true
				}
			}
		}
	}
	return false
}

func (v *val) describe() string {
	switch v.k {
	case vHandle:
		return fmt.Sprintf("handle of %s in state %s", v.kind, v.state)
	case vPermit:
		return "permit for " + v.op
	case vProposal:
		return "proposal of " + v.op
	case vOutcome:
		var tags []string
		for _, t := range v.tags {
			tags = append(tags, t.tag)
		}
		return "outcome (" + strings.Join(tags, " | ") + ")"
	case vValue:
		return v.vt + " value"
	}
	return "value"
}

func equalVal(a, b *val) bool {
	if a.k != b.k {
		return false
	}
	switch a.k {
	case vValue:
		return a.vt == b.vt && a.vid == b.vid
	case vHandle:
		return a.kind == b.kind && a.state == b.state && a.res == b.res && a.rev == b.rev
	case vPermit, vProposal:
		if a.op != b.op || a.open != b.open || len(a.deps) != len(b.deps) {
			return false
		}
		for k, d := range a.deps {
			if b.deps[k] != d {
				return false
			}
		}
		return true
	case vOutcome:
		if len(a.tags) != len(b.tags) {
			return false
		}
		for i, t := range a.tags {
			u := b.tags[i]
			if t.tag != u.tag || t.class != u.class || len(t.fields) != len(u.fields) {
				return false
			}
			for j, f := range t.fields {
				if f.name != u.fields[j].name || !equalVal(f.v, u.fields[j].v) {
					return false
				}
			}
		}
		return true
	}
	return true
}

// sameShape: the same sort of thing in the same state, whatever its
// identity (the loop invariant).
func sameShape(a, b *val) bool {
	if a.k != b.k || a.kind != b.kind || a.state != b.state || a.op != b.op || len(a.tags) != len(b.tags) {
		return false
	}
	for i := range a.tags {
		if a.tags[i].tag != b.tags[i].tag {
			return false
		}
	}
	return true
}

type status int

const (
	avail status = iota
	consumed
	poisoned
)

type binding struct {
	v       *val
	st      status
	at      Span // where it was consumed, or the join that poisoned it
	why     string
	related []Related
}

type env struct {
	vars  map[string]*binding
	order []string
	revs  map[int]int  // resource → its current revision
	revAt map[int]Span // where that revision was made
	live  bool
}

func newEnv() *env {
	return &env{vars: map[string]*binding{}, revs: map[int]int{}, revAt: map[int]Span{}, live: true}
}

func (e *env) clone() *env {
	o := &env{vars: make(map[string]*binding, len(e.vars)), order: append([]string(nil), e.order...),
		revs: make(map[int]int, len(e.revs)), revAt: make(map[int]Span, len(e.revAt)), live: e.live}
	for k, b := range e.vars {
		nb := *b
		o.vars[k] = &nb
	}
	for k, v := range e.revs {
		o.revs[k] = v
	}
	for k, v := range e.revAt {
		o.revAt[k] = v
	}
	return o
}

func (e *env) names() []string { return append([]string(nil), e.order...) }

func (e *env) put(name string, b *binding) {
	if _, ok := e.vars[name]; !ok {
		e.order = append(e.order, name)
	}
	e.vars[name] = b
}

// drop forgets every name not in keep: the locals of a block at its end.
func (e *env) drop(keep []string) {
	k := map[string]bool{}
	for _, n := range keep {
		k[n] = true
	}
	var order []string
	for _, n := range e.order {
		if k[n] {
			order = append(order, n)
		} else {
			delete(e.vars, n)
		}
	}
	e.order = order
}

func (e *env) stale(v *val) bool { return v.k == vHandle && v.rev < e.revs[v.res] }

// --- the checker -------------------------------------------------------------

type raise struct {
	tag  string
	tv   *tagVal
	env  *env
	span Span
}

type frame struct{ raises []raise }

type touch struct {
	span  Span
	write bool
}

// tracker records which outer names a parallel branch touches.
type tracker struct {
	outer   map[string]bool
	touches map[string]touch
	order   []string
}

type checker struct {
	wf        *Workflow
	protos    map[string]*Protocol
	ops       map[string]*Operation
	agents    map[string]*Agent
	authority map[string]bool
	ceiling   map[string]bool

	diags   []Diagnostic
	mute    int
	effects map[string]bool
	exits   []*env

	frames     []*frame
	trackers   []*tracker
	raceDepth  int
	retryDepth int
	parDepth   int

	nextRes, nextRev, nextVid int
}

func (c *checker) freshRes() int    { c.nextRes++; return c.nextRes }
func (c *checker) freshRev() int    { c.nextRev++; return c.nextRev }
func (c *checker) freshVid() string { c.nextVid++; return fmt.Sprintf("v%d", c.nextVid) }

type extra struct {
	related          []Related
	required, actual string
}

func (c *checker) report(code string, at Span, msg string, x ...extra) {
	if c.mute > 0 {
		return
	}
	d := Diagnostic{Code: code, Message: msg, Span: at, Remediation: Codes[code]}
	for _, e := range x {
		d.Related = append(d.Related, e.related...)
		if e.required != "" {
			d.Required = e.required
		}
		if e.actual != "" {
			d.Actual = e.actual
		}
	}
	c.diags = append(c.diags, d)
}

func related(r ...Related) extra { return extra{related: r} }

func exprSpan(x *Expr, at Span) Span {
	if x != nil && x.Span != nil {
		return *x.Span
	}
	return at
}

func (c *checker) touch(name string, at Span, write bool) {
	for _, t := range c.trackers {
		if !t.outer[name] {
			continue
		}
		if old, ok := t.touches[name]; ok {
			if write && !old.write {
				old.write = true
				t.touches[name] = old
			}
			continue
		}
		t.touches[name] = touch{span: at, write: write}
		t.order = append(t.order, name)
	}
}

func (c *checker) raise(r raise) {
	if n := len(c.frames); n > 0 {
		c.frames[n-1].raises = append(c.frames[n-1].raises, r)
		return
	}
	c.report(EUnhandled, r.span, fmt.Sprintf("nothing handles the outcome %s this call can end with", r.tag))
}

func (c *checker) pushFrame() *frame {
	f := &frame{}
	c.frames = append(c.frames, f)
	return f
}

func (c *checker) popFrame() { c.frames = c.frames[:len(c.frames)-1] }

// use looks a variable up. It reports a name that is unbound, consumed or
// not owned after a join, and returns nil for those and for values an
// earlier diagnostic concerns.
func (c *checker) use(e *env, x *Expr, at Span, write bool) *binding {
	sp := exprSpan(x, at)
	b := e.vars[x.Var]
	if b == nil {
		c.report(EUnknownName, sp, fmt.Sprintf("%s is not bound here", x.Var))
		return nil
	}
	c.touch(x.Var, sp, write)
	switch b.st {
	case consumed:
		c.report(EConsumed, sp, fmt.Sprintf("%s (a %s) was already consumed", x.Var, b.v.describe()), related(rel(b.at, "consumed here")))
		return nil
	case poisoned:
		c.report(EBranchOwnership, sp, fmt.Sprintf("%s is not owned here: %s", x.Var, b.why), related(b.related...))
		return nil
	}
	if b.v.k == vErr {
		return nil
	}
	return b
}

func (c *checker) consume(e *env, name string, at Span) {
	b := e.vars[name]
	if b == nil {
		return
	}
	c.touch(name, at, true)
	b.st, b.at = consumed, at
}

func (c *checker) assign(e *env, name string, v *val) {
	if _, ok := e.vars[name]; ok {
		c.touch(name, v.origin, true)
	}
	e.put(name, &binding{v: v, st: avail})
}

// --- declarations --------------------------------------------------------------

func (c *checker) declarations() {
	wf := c.wf
	c.protos, c.ops, c.agents = map[string]*Protocol{}, map[string]*Operation{}, map[string]*Agent{}
	c.authority, c.ceiling = map[string]bool{}, map[string]bool{}
	for _, k := range wf.Authority {
		c.authority[k] = true
	}
	for _, k := range wf.EffectCeiling {
		c.ceiling[k] = true
	}
	bad := func(at *Span, format string, a ...any) {
		c.report(EInvalidDeclaration, *at, fmt.Sprintf(format, a...))
	}
	for _, p := range wf.Protocols {
		if c.protos[p.Kind] != nil {
			bad(p.Span, "protocol %s is declared twice", p.Kind)
			continue
		}
		c.protos[p.Kind] = p
		if len(p.States) == 0 {
			bad(p.Span, "protocol %s declares no states", p.Kind)
		}
		seen := map[string]bool{}
		for _, s := range p.States {
			if s == "" || seen[s] {
				bad(p.Span, "protocol %s declares state %q twice or empty", p.Kind, s)
			}
			seen[s] = true
		}
		known := func(s, what string) {
			if !seen[s] {
				bad(p.Span, "protocol %s: %s %q is not one of its states", p.Kind, what, s)
			}
		}
		known(p.Initial, "initial state")
		for _, t := range p.Transitions {
			known(t.From, "transition source")
			known(t.To, "transition target")
		}
		if p.Propose != nil {
			known(p.Propose.From, "propose source")
			known(p.Propose.To, "propose target")
		}
		if p.Approval != nil {
			known(p.Approval.From, "approval source")
			known(p.Approval.Granted, "granted state")
			known(p.Approval.Denied, "denied state")
		}
	}
	for _, op := range wf.Operations {
		if c.ops[op.Name] != nil {
			bad(op.Span, "operation %s is declared twice", op.Name)
			continue
		}
		c.ops[op.Name] = op
		c.checkOperation(op, bad)
	}
	for _, a := range wf.Agents {
		if c.agents[a.Name] != nil {
			bad(a.Span, "agent %s is declared twice", a.Name)
			continue
		}
		c.agents[a.Name] = a
		for _, t := range a.Tools {
			if c.ops[t] == nil {
				bad(a.Span, "agent %s's tool %s is not a declared operation", a.Name, t)
			}
		}
	}
}

func (c *checker) checkOperation(op *Operation, bad func(*Span, string, ...any)) {
	inputs := map[string]*Input{}
	for _, in := range op.Inputs {
		if inputs[in.Name] != nil {
			bad(op.Span, "%s declares input %s twice", op.Name, in.Name)
			continue
		}
		inputs[in.Name] = in
		switch {
		case in.Type.Permit != "" || in.Type.Proposal != "":
			bad(op.Span, "%s: input %s is a %s; a permit goes in a call's permit member, and a proposal only to request_approval", op.Name, in.Name, in.Type)
		case in.Type.Handle != "":
			if in.Name == "permit" || in.Name == "reason" {
				bad(op.Span, "%s: a handle input cannot be named %s (request_approval's outcomes use the name)", op.Name, in.Name)
			}
			p := c.protos[in.Type.Handle]
			if p == nil {
				bad(op.Span, "%s: input %s is a handle of %s, which no protocol declares", op.Name, in.Name, in.Type.Handle)
				break
			}
			if len(in.States) == 0 {
				bad(op.Span, "%s: handle input %s names no state it accepts", op.Name, in.Name)
			}
			for _, s := range in.States {
				if !contains(p.States, s) {
					bad(op.Span, "%s: input %s accepts state %s, which %s does not have", op.Name, in.Name, s, p.Kind)
				}
			}
		default:
			if len(in.States) > 0 || in.Borrow {
				bad(op.Span, "%s: only a handle input names states or is borrowed (%s)", op.Name, in.Name)
			}
		}
	}
	if contains(op.Effects, "financial_write") && !contains(op.Effects, "external_write") {
		bad(op.Span, "%s declares financial_write without external_write, which it refines", op.Name)
	}
	if len(op.Outcomes) == 0 {
		bad(op.Span, "%s declares no outcome", op.Name)
	}
	tags := map[string]bool{}
	for _, o := range op.Outcomes {
		if tags[o.Tag] {
			bad(op.Span, "%s declares outcome %s twice", op.Name, o.Tag)
		}
		tags[o.Tag] = true
		fields := map[string]bool{}
		for _, f := range o.Fields {
			if fields[f.Name] {
				bad(op.Span, "%s: outcome %s declares field %s twice", op.Name, o.Tag, f.Name)
			}
			fields[f.Name] = true
			switch {
			case f.Type.Permit != "":
				bad(op.Span, "%s: outcome %s returns a permit; only the approval resolver issues permits", op.Name, o.Tag)
			case f.Type.Proposal != "":
				bad(op.Span, "%s: outcome %s returns a proposal; only propose makes one", op.Name, o.Tag)
			case f.Type.Handle != "":
				c.checkHandleField(op, o, f, inputs, bad)
			default:
				if f.State != "" || f.From != "" || f.Revision != "" {
					bad(op.Span, "%s: outcome %s field %s is a value and names no state, source or revision", op.Name, o.Tag, f.Name)
				}
			}
		}
	}
}

func (c *checker) checkHandleField(op *Operation, o *Outcome, f *Field, inputs map[string]*Input, bad func(*Span, string, ...any)) {
	p := c.protos[f.Type.Handle]
	if p == nil {
		bad(op.Span, "%s: outcome %s field %s is a handle of %s, which no protocol declares", op.Name, o.Tag, f.Name, f.Type.Handle)
		return
	}
	if !contains(p.States, f.State) {
		bad(op.Span, "%s: outcome %s field %s is in state %q, which %s does not have", op.Name, o.Tag, f.Name, f.State, p.Kind)
		return
	}
	if f.From == "" {
		if f.Revision == "new" {
			bad(op.Span, "%s: outcome %s field %s is a new revision of no input", op.Name, o.Tag, f.Name)
		}
		if f.State != p.Initial {
			bad(op.Span, "%s: outcome %s creates a %s in %s, not in its initial state %s", op.Name, o.Tag, p.Kind, f.State, p.Initial)
		}
		return
	}
	in := inputs[f.From]
	if in == nil || in.Type.Handle != f.Type.Handle {
		bad(op.Span, "%s: outcome %s field %s comes from %s, which is not a %s handle input", op.Name, o.Tag, f.Name, f.From, f.Type.Handle)
		return
	}
	if f.Revision == "new" {
		if f.State != p.Initial {
			bad(op.Span, "%s: outcome %s makes a new revision in %s, not in %s's initial state %s", op.Name, o.Tag, f.State, p.Kind, p.Initial)
		}
		return
	}
	if in.Borrow {
		bad(op.Span, "%s: outcome %s hands back the borrowed handle %s, which the caller still holds", op.Name, o.Tag, f.From)
		return
	}
	for _, s := range in.States {
		if s == f.State {
			continue
		}
		ok := false
		for _, t := range p.Transitions {
			if t.From == s && t.To == f.State {
				ok = true
			}
		}
		if !ok {
			bad(op.Span, "%s: outcome %s moves %s from %s to %s, which protocol %s does not allow", op.Name, o.Tag, f.From, s, f.State, p.Kind)
		}
	}
}

func (c *checker) params() *env {
	e := newEnv()
	for _, p := range c.wf.Params {
		sp := *p.Span
		if _, dup := e.vars[p.Name]; dup {
			c.report(EInvalidDeclaration, sp, fmt.Sprintf("parameter %s is declared twice", p.Name))
			continue
		}
		var v *val
		switch {
		case p.Type.Handle != "":
			proto := c.protos[p.Type.Handle]
			if proto == nil || !contains(proto.States, p.State) {
				c.report(EInvalidDeclaration, sp, fmt.Sprintf("parameter %s: a %s handle in state %q is not declared by any protocol", p.Name, p.Type.Handle, p.State))
				v = errVal
				break
			}
			res, rev := c.freshRes(), c.freshRev()
			e.revs[res], e.revAt[res] = rev, sp
			v = &val{k: vHandle, kind: p.Type.Handle, state: p.State, res: res, rev: rev, origin: sp}
		case p.Type.Permit != "":
			v = c.permitParam(e, p)
		case p.Type.Proposal != "":
			c.report(EInvalidDeclaration, sp, fmt.Sprintf("parameter %s: a workflow takes no proposal; propose one", p.Name))
			v = errVal
		default:
			if p.State != "" || p.Binds != nil {
				c.report(EInvalidDeclaration, sp, fmt.Sprintf("parameter %s is a value and names no state or binds", p.Name))
			}
			v = &val{k: vValue, vt: p.Type.Value, vid: "param:" + p.Name, origin: sp}
		}
		e.put(p.Name, &binding{v: v, st: avail})
	}
	return e
}

func (c *checker) permitParam(e *env, p *Param) *val {
	sp := *p.Span
	op := c.ops[p.Type.Permit]
	if op == nil {
		c.report(EInvalidDeclaration, sp, fmt.Sprintf("parameter %s is a permit for %s, which is not a declared operation", p.Name, p.Type.Permit))
		return errVal
	}
	v := &val{k: vPermit, op: op.Name, deps: map[string]dep{}, open: true, origin: sp}
	for _, in := range op.Inputs {
		if in.Type.Handle == "" {
			continue
		}
		target, ok := p.Binds[in.Name]
		b := e.vars[target]
		if !ok || b == nil || b.v.k != vHandle || b.v.kind != in.Type.Handle {
			c.report(EInvalidDeclaration, sp, fmt.Sprintf("parameter %s: the permit must bind %s's handle input %s to an earlier %s handle parameter", p.Name, op.Name, in.Name, in.Type.Handle))
			return errVal
		}
		v.deps[in.Name] = dep{handle: true, kind: b.v.kind, res: b.v.res, rev: b.v.rev}
	}
	for k := range p.Binds {
		if in := inputOf(op, k); in == nil || in.Type.Handle == "" {
			c.report(EInvalidDeclaration, sp, fmt.Sprintf("parameter %s binds %s, which is not a handle input of %s", p.Name, k, op.Name))
			return errVal
		}
	}
	return v
}

func inputOf(op *Operation, name string) *Input {
	for _, in := range op.Inputs {
		if in.Name == name {
			return in
		}
	}
	return nil
}

// --- statements ------------------------------------------------------------------

// block analyses a block; its locals are forgotten at its end.
func (c *checker) block(e *env, stmts []*Stmt) {
	keep := e.names()
	c.stmts(e, stmts)
	e.drop(keep)
}

func (c *checker) stmts(e *env, stmts []*Stmt) {
	for _, s := range stmts {
		if !e.live {
			c.report(EControl, *s.Span, "this statement is never reached: every path before it has returned")
			return
		}
		c.stmt(e, s)
	}
}

func (c *checker) stmt(e *env, s *Stmt) {
	sp := *s.Span
	switch s.Kind {
	case KCall:
		c.bindResult(e, s, c.callVal(e, s))
	case KRequestApproval:
		c.bindResult(e, s, c.requestApprovalVal(e, s))
	case KPropose:
		c.propose(e, s)
	case KLet:
		c.let(e, s)
	case KIf:
		names := e.names()
		c.cond(e, s.Cond, sp)
		te, ee := e.clone(), e.clone()
		c.block(te, s.Then)
		c.block(ee, s.Else)
		*e = *c.join([]*env{te, ee}, names, sp)
	case KMatch:
		c.match(e, s)
	case KLoop:
		c.loop(e, s)
	case KRetry:
		c.retry(e, s)
	case KTry:
		c.try(e, s)
	case KFallback:
		c.fallback(e, s)
	case KParallel, KRace:
		c.parallel(e, s)
	case KParallelMap:
		c.parallelMap(e, s)
	case KAgent:
		c.agent(e, s)
	case KReturn:
		if c.parDepth > 0 {
			c.report(EControl, sp, "return cannot leave a parallel scope")
		}
		if s.Value != nil && s.Value.Var != "" {
			if b := c.use(e, s.Value, sp, true); b != nil && b.v.affine() {
				c.consume(e, s.Value.Var, exprSpan(s.Value, sp))
			}
		}
		if c.mute == 0 {
			c.exits = append(c.exits, e.clone())
		}
		e.live = false
	}
}

// litType is the value type of a literal.
func litType(raw json.RawMessage) string {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return "data"
	}
	switch t := v.(type) {
	case bool:
		return "bool"
	case string:
		return "string"
	case json.Number:
		if _, err := t.Int64(); err == nil {
			return "int"
		}
	case []any:
		return "list"
	}
	return "data"
}

// litIdentity is a literal's value identity: equal literals are the same value.
func litIdentity(raw json.RawMessage) string {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return "lit:" + string(raw)
	}
	b, _ := json.Marshal(v)
	return "lit:" + string(b)
}

func compat(param, actual string) bool { return param == "data" || param == actual }

func (c *checker) cond(e *env, x *Expr, at Span) {
	sp := exprSpan(x, at)
	if x.Var == "" {
		if litType(x.Lit) != "bool" {
			c.report(EInputs, sp, "a condition is a Bool", extra{required: "bool", actual: litType(x.Lit)})
		}
		return
	}
	b := c.use(e, x, at, false)
	if b != nil && (b.v.k != vValue || b.v.vt != "bool") {
		c.report(EInputs, sp, fmt.Sprintf("a condition is a Bool; %s is a %s", x.Var, b.v.describe()), extra{required: "bool", actual: b.v.describe()})
	}
}

// valueOf checks an expression used as an ordinary value of type want
// ("" for any) and returns its identity ("" when it is wrong).
func (c *checker) valueOf(e *env, x *Expr, at Span, want, what string) (vt, id string) {
	sp := exprSpan(x, at)
	if x.Var == "" {
		vt = litType(x.Lit)
		if want != "" && !compat(want, vt) {
			c.report(EInputs, sp, fmt.Sprintf("%s is a %s; a %s literal is not one", what, want, vt), extra{required: want, actual: vt})
			return "", ""
		}
		return vt, litIdentity(x.Lit)
	}
	b := c.use(e, x, at, false)
	if b == nil {
		return "", ""
	}
	if b.v.k != vValue {
		c.report(EInputs, sp, fmt.Sprintf("%s is an ordinary value; %s is a %s", what, x.Var, b.v.describe()), extra{required: orAny(want), actual: b.v.describe()})
		return "", ""
	}
	if want != "" && !compat(want, b.v.vt) {
		c.report(EInputs, sp, fmt.Sprintf("%s is a %s; %s is a %s", what, want, x.Var, b.v.vt), extra{required: want, actual: b.v.vt})
		return "", ""
	}
	return b.v.vt, b.v.vid
}

func orAny(s string) string {
	if s == "" {
		return "a value"
	}
	return s
}

// trusted checks an expression that must be a handle, permit, proposal or
// outcome: a literal or an ordinary value there is a forgery.
func (c *checker) trusted(e *env, x *Expr, at Span, want vkind, what string) *binding {
	sp := exprSpan(x, at)
	if x.Var == "" {
		c.report(EForged, sp, fmt.Sprintf("a literal is not a %s: it cannot be made from data", what))
		return nil
	}
	b := c.use(e, x, at, false)
	if b == nil {
		return nil
	}
	switch {
	case b.v.k == want:
		return b
	case b.v.k == vValue:
		c.report(EForged, sp, fmt.Sprintf("%s is ordinary data (%s), not a %s; only trusted operations make one", x.Var, b.v.vt, what),
			extra{required: what, actual: b.v.vt})
	default:
		c.report(EInputs, sp, fmt.Sprintf("%s is a %s, not a %s", x.Var, b.v.describe(), what), extra{required: what, actual: b.v.describe()})
	}
	return nil
}

type arg struct {
	ok     bool
	handle bool
	name   string // the variable, for a handle
	kind   string
	res    int
	rev    int
	val    string
}

const (
	forCall = iota
	forPropose
)

// args checks a call's or proposal's arguments against the operation's
// declared inputs, in declaration order, consuming handle inputs of a call
// as it goes (so that one handle passed twice is consumed twice).
func (c *checker) args(e *env, s *Stmt, op *Operation, mode int) map[string]arg {
	sp := *s.Span
	out := map[string]arg{}
	for _, name := range sortedKeys(s.Args) {
		if inputOf(op, name) == nil {
			c.report(EInputs, exprSpan(s.Args[name], sp), fmt.Sprintf("%s has no input %s", op.Name, name))
		}
	}
	for _, in := range op.Inputs {
		x := s.Args[in.Name]
		if x == nil {
			if !in.Optional {
				c.report(EInputs, sp, fmt.Sprintf("%s requires input %s (%s)", op.Name, in.Name, in.Type))
			}
			continue
		}
		xs := exprSpan(x, sp)
		switch {
		case in.Type.Handle != "":
			b := c.trusted(e, x, sp, vHandle, "handle of "+in.Type.Handle)
			if b == nil {
				continue
			}
			if b.v.kind != in.Type.Handle {
				c.report(EInputs, xs, fmt.Sprintf("%s expects a handle of %s for %s; %s is a handle of %s", op.Name, in.Type.Handle, in.Name, x.Var, b.v.kind),
					extra{required: in.Type.Handle, actual: b.v.kind})
				continue
			}
			if e.stale(b.v) {
				c.report(EStale, xs, fmt.Sprintf("%s is a stale handle: an edit made a newer revision of its %s", x.Var, b.v.kind),
					related(rel(e.revAt[b.v.res], "the newer revision was made here")))
				continue
			}
			want := in.States
			if mode == forPropose {
				p := c.protos[b.v.kind]
				if p == nil || p.Propose == nil {
					c.report(EState, xs, fmt.Sprintf("protocol %s has no propose transition", b.v.kind))
					continue
				}
				want = []string{p.Propose.From}
			}
			if !contains(want, b.v.state) {
				c.report(EState, xs, fmt.Sprintf("%s needs %s in state %s; it is %s", verb(mode, op.Name), x.Var, strings.Join(want, " or "), b.v.state),
					extra{required: strings.Join(want, " | "), actual: b.v.state, related: []Related{rel(b.v.origin, "%s got its state here", x.Var)}})
				continue
			}
			out[in.Name] = arg{ok: true, handle: true, name: x.Var, kind: b.v.kind, res: b.v.res, rev: b.v.rev}
			switch {
			case mode == forPropose:
				nv := *b.v
				nv.state, nv.origin = c.protos[b.v.kind].Propose.To, sp
				c.touch(x.Var, xs, true)
				b.v = &nv
			case !in.Borrow:
				c.consume(e, x.Var, xs)
			}
		case in.Type.Permit != "" || in.Type.Proposal != "":
			// An invalid declaration, already reported.
		default:
			if vt, id := c.valueOf(e, x, sp, in.Type.Value, fmt.Sprintf("input %s of %s", in.Name, op.Name)); vt != "" {
				out[in.Name] = arg{ok: true, val: id}
			}
		}
	}
	return out
}

func verb(mode int, op string) string {
	if mode == forPropose {
		return "proposing " + op
	}
	return op
}

func (c *checker) addEffects(effects []string, at Span, who string, idempotent bool) {
	var outside []string
	for _, ef := range effects {
		c.effects[ef] = true
		if !c.ceiling[ef] {
			outside = append(outside, ef)
		}
	}
	if len(outside) > 0 {
		c.report(EEffect, at, fmt.Sprintf("%s can perform %s, outside the workflow's effect ceiling", who, strings.Join(outside, ", ")),
			extra{required: strings.Join(c.wf.EffectCeiling, ", "), actual: strings.Join(effects, ", ")})
	}
	if contains(effects, "external_write") {
		if c.raceDepth > 0 {
			c.report(EProtectedRace, at, fmt.Sprintf("%s is a protected external write inside a race: cancelling the losing branch cannot retract its effect", who))
		}
		if c.retryDepth > 0 && !idempotent {
			c.report(EUnsafeRetry, at, fmt.Sprintf("%s is an external write that is not idempotent: a retry may perform it twice", who))
		}
	}
}

// callVal analyses a call and returns its outcome value.
func (c *checker) callVal(e *env, s *Stmt) *val {
	sp := *s.Span
	op := c.ops[s.Op]
	if op == nil {
		c.report(EUnknownDecl, sp, fmt.Sprintf("%s is not a declared operation", s.Op))
		return errVal
	}
	for _, k := range op.Authority {
		if !c.authority[k] {
			c.report(EAuthority, sp, fmt.Sprintf("%s requires %s authority, which the workflow does not have", op.Name, k),
				extra{required: k, actual: strings.Join(c.wf.Authority, ", ")})
		}
	}
	c.addEffects(op.Effects, sp, op.Name, op.Idempotent)
	args := c.args(e, s, op, forCall)
	c.checkPermit(e, s, op, args)
	return c.outcome(e, sp, op, args)
}

func (c *checker) checkPermit(e *env, s *Stmt, op *Operation, args map[string]arg) {
	sp := *s.Span
	if s.Permit == nil {
		if op.Approval {
			c.report(EMissingPermit, sp, fmt.Sprintf("%s is approval-protected and is called without a permit", op.Name))
		}
		return
	}
	x := s.Permit
	xs := exprSpan(x, sp)
	b := c.trusted(e, x, sp, vPermit, "permit")
	if b == nil {
		return
	}
	p := b.v
	c.consume(e, x.Var, xs)
	if p.op != op.Name {
		c.report(EUnboundApproval, xs, fmt.Sprintf("%s is a permit for %s, not for %s", x.Var, p.op, op.Name), extra{required: op.Name, actual: p.op})
		return
	}
	for _, in := range op.Inputs {
		d, hasDep := p.deps[in.Name]
		a, hasArg := args[in.Name]
		if in.Type.Handle != "" {
			if !hasDep {
				continue
			}
			if hasArg && a.ok && a.res != d.res {
				c.report(EUnboundApproval, xs, fmt.Sprintf("%s approves another %s than the one passed as %s", x.Var, d.kind, in.Name))
				return
			}
			if d.rev < e.revs[d.res] {
				c.report(EStale, xs, fmt.Sprintf("%s approves a revision of the %s that an edit superseded", x.Var, d.kind),
					related(rel(e.revAt[d.res], "the newer revision was made here")))
				return
			}
			continue
		}
		if p.open {
			continue
		}
		argPresent := s.Args[in.Name] != nil
		if hasDep != argPresent || (hasDep && (!a.ok || a.val != d.val)) {
			if argPresent && !a.ok {
				continue // the argument itself is wrong, and says so
			}
			c.report(EUnboundApproval, exprSpan(s.Args[in.Name], sp), fmt.Sprintf("input %s differs from the proposal %s approves", in.Name, x.Var),
				related(rel(p.origin, "approved here")))
			return
		}
	}
}

// outcome builds the value an operation's call returns.
func (c *checker) outcome(e *env, at Span, op *Operation, args map[string]arg) *val {
	newRev := map[string]int{}
	for _, o := range op.Outcomes {
		for _, f := range o.Fields {
			if f.From == "" || f.Revision != "new" {
				continue
			}
			if _, done := newRev[f.From]; done {
				continue
			}
			if a := args[f.From]; a.ok && a.handle {
				r := c.freshRev()
				newRev[f.From] = r
				e.revs[a.res], e.revAt[a.res] = r, at
			}
		}
	}
	out := &val{k: vOutcome, origin: at}
	for _, o := range op.Outcomes {
		t := &tagVal{tag: o.Tag, class: o.Class}
		for _, f := range o.Fields {
			var v *val
			switch {
			case f.Type.Handle != "" && f.From != "":
				a := args[f.From]
				if !a.ok || !a.handle {
					v = errVal
					break
				}
				rev := a.rev
				if f.Revision == "new" {
					rev = newRev[f.From]
				}
				v = &val{k: vHandle, kind: f.Type.Handle, state: f.State, res: a.res, rev: rev, origin: at}
			case f.Type.Handle != "":
				res, rev := c.freshRes(), c.freshRev()
				e.revs[res], e.revAt[res] = rev, at
				v = &val{k: vHandle, kind: f.Type.Handle, state: f.State, res: res, rev: rev, origin: at}
			case f.Type.Value != "":
				v = &val{k: vValue, vt: f.Type.Value, vid: c.freshVid(), origin: at}
			default:
				v = errVal
			}
			t.fields = append(t.fields, fieldVal{name: f.Name, v: v})
		}
		out.tags = append(out.tags, t)
	}
	return out
}

// bindResult binds a call's or request_approval's outcome: to one name, or
// its single success outcome's fields to names, raising the other outcomes
// to the enclosing try.
func (c *checker) bindResult(e *env, s *Stmt, out *val) {
	sp := *s.Span
	if s.Bind == nil {
		return
	}
	if s.Bind.Fields == nil {
		v := out
		if v.k != vErr {
			nv := *v
			nv.origin = sp
			v = &nv
		}
		c.assign(e, s.Bind.Name, v)
		return
	}
	if out.k == vErr {
		for _, f := range sortedKeys(s.Bind.Fields) {
			c.assign(e, s.Bind.Fields[f], errVal)
		}
		return
	}
	var succ []*tagVal
	for _, t := range out.tags {
		if t.class == ClassSuccess {
			succ = append(succ, t)
		}
	}
	if len(succ) != 1 {
		c.report(EUnhandled, sp, fmt.Sprintf("this call has %d success outcomes; match its result instead of binding fields", len(succ)))
		for _, f := range sortedKeys(s.Bind.Fields) {
			c.assign(e, s.Bind.Fields[f], errVal)
		}
		return
	}
	for _, t := range out.tags {
		if t != succ[0] {
			c.raise(raise{tag: t.tag, tv: t, env: e.clone(), span: sp})
		}
	}
	c.bindFields(e, succ[0], s.Bind.Fields, sp)
}

func (c *checker) bindFields(e *env, t *tagVal, m map[string]string, at Span) {
	for _, f := range sortedKeys(m) {
		var v *val
		if t != nil {
			if v = t.field(f); v == nil {
				c.report(EArm, at, fmt.Sprintf("outcome %s has no field %s", t.tag, f))
			}
		}
		if v == nil {
			v = errVal
		}
		if v.k != vErr {
			nv := *v
			nv.origin = at
			v = &nv
		}
		c.assign(e, m[f], v)
	}
}

func (c *checker) propose(e *env, s *Stmt) {
	sp := *s.Span
	op := c.ops[s.Op]
	if op == nil {
		c.report(EUnknownDecl, sp, fmt.Sprintf("%s is not a declared operation", s.Op))
		if s.Bind != nil {
			c.assign(e, s.Bind.Name, errVal)
		}
		return
	}
	for _, k := range op.Authority {
		if !c.authority[k] {
			c.report(EAuthority, sp, fmt.Sprintf("proposing %s requires %s authority, which the workflow does not have", op.Name, k),
				extra{required: k, actual: strings.Join(c.wf.Authority, ", ")})
		}
	}
	args := c.args(e, s, op, forPropose)
	complete := true
	deps := map[string]dep{}
	for _, in := range op.Inputs {
		a, ok := args[in.Name]
		switch {
		case ok && a.handle:
			deps[in.Name] = dep{handle: true, kind: a.kind, res: a.res, rev: a.rev}
		case ok:
			deps[in.Name] = dep{val: a.val}
		case s.Args[in.Name] != nil:
			complete = false
		}
	}
	if s.Bind == nil {
		return
	}
	v := &val{k: vProposal, op: op.Name, deps: deps, origin: sp}
	if !complete {
		v = errVal
	}
	c.assign(e, s.Bind.Name, v)
}

func (c *checker) requestApprovalVal(e *env, s *Stmt) *val {
	sp := *s.Span
	c.addEffects([]string{"human"}, sp, "request_approval", true)
	x := s.Proposal
	xs := exprSpan(x, sp)
	b := c.trusted(e, x, sp, vProposal, "proposal")
	if b == nil {
		return errVal
	}
	pr := b.v
	op := c.ops[pr.op]
	granted := &tagVal{tag: "Granted", class: ClassSuccess}
	denied := &tagVal{tag: "Denied", class: ClassDenied}
	granted.fields = append(granted.fields, fieldVal{name: "permit", v: &val{k: vPermit, op: pr.op, deps: pr.deps, origin: sp}})
	denied.fields = append(denied.fields, fieldVal{name: "reason", v: &val{k: vValue, vt: "string", vid: c.freshVid(), origin: sp}})
	for _, in := range op.Inputs {
		d, ok := pr.deps[in.Name]
		if !ok || !d.handle {
			continue
		}
		gv, dv := errVal, errVal
		if h := c.takeHandle(e, x, xs, d); h != nil {
			p := c.protos[d.kind]
			switch {
			case p == nil || p.Approval == nil:
				c.report(EState, xs, fmt.Sprintf("protocol %s has no approval step", d.kind))
			case h.state != p.Approval.From:
				c.report(EState, xs, fmt.Sprintf("request_approval needs the %s in state %s; it is %s", d.kind, p.Approval.From, h.state),
					extra{required: p.Approval.From, actual: h.state})
			default:
				gv = &val{k: vHandle, kind: d.kind, state: p.Approval.Granted, res: d.res, rev: d.rev, origin: sp}
				dv = &val{k: vHandle, kind: d.kind, state: p.Approval.Denied, res: d.res, rev: d.rev, origin: sp}
			}
		}
		granted.fields = append(granted.fields, fieldVal{name: in.Name, v: gv})
		denied.fields = append(denied.fields, fieldVal{name: in.Name, v: dv})
	}
	return &val{k: vOutcome, tags: []*tagVal{granted, denied}, origin: sp}
}

// takeHandle finds and consumes the live handle a proposal names: the
// approval moves the resource on, so the caller's handle goes into the
// decision.
func (c *checker) takeHandle(e *env, x *Expr, xs Span, d dep) *val {
	if d.rev < e.revs[d.res] {
		c.report(EStale, xs, fmt.Sprintf("%s proposes a revision of a %s that an edit superseded", x.Var, d.kind),
			related(rel(e.revAt[d.res], "the newer revision was made here")))
		return nil
	}
	var gone *binding
	var goneName string
	for _, n := range e.order {
		b := e.vars[n]
		if b.v.k != vHandle || b.v.res != d.res {
			continue
		}
		if b.st == avail && b.v.rev == d.rev {
			c.touch(n, xs, true)
			h := b.v
			c.consume(e, n, xs)
			return h
		}
		if gone == nil {
			gone, goneName = b, n
		}
	}
	switch {
	case gone != nil && gone.st == poisoned:
		c.report(EBranchOwnership, xs, fmt.Sprintf("the %s %s proposes is not owned here: %s", d.kind, x.Var, gone.why), related(gone.related...))
	case gone != nil:
		c.report(EConsumed, xs, fmt.Sprintf("the %s %s proposes (%s) was already consumed", d.kind, x.Var, goneName), related(rel(gone.at, "consumed here")))
	default:
		c.report(EConsumed, xs, fmt.Sprintf("the workflow no longer holds the %s %s proposes", d.kind, x.Var))
	}
	return nil
}

func (c *checker) let(e *env, s *Stmt) {
	sp := *s.Span
	x := s.Value
	xs := exprSpan(x, sp)
	name := s.Bind.Name
	t := s.Type
	if x.Var == "" {
		vt := litType(x.Lit)
		switch {
		case t != nil && t.Value == "":
			c.report(EForged, xs, fmt.Sprintf("a literal is not a %s: declaring it one does not make it one", t))
			c.assign(e, name, errVal)
			return
		case t != nil && !compat(t.Value, vt):
			c.report(EInputs, xs, fmt.Sprintf("%s is declared %s; the literal is a %s", name, t.Value, vt), extra{required: t.Value, actual: vt})
			c.assign(e, name, errVal)
			return
		case t != nil:
			vt = t.Value
		}
		c.assign(e, name, &val{k: vValue, vt: vt, vid: litIdentity(x.Lit), origin: sp})
		return
	}
	b := c.use(e, x, sp, false)
	if b == nil {
		c.assign(e, name, errVal)
		return
	}
	if t != nil {
		switch {
		case t.Value == "" && b.v.k == vValue:
			c.report(EForged, xs, fmt.Sprintf("%s is ordinary data (%s); declaring it a %s does not make it one", x.Var, b.v.vt, t), extra{required: t.String(), actual: b.v.vt})
			c.assign(e, name, errVal)
			return
		case t.Value == "" && !typeIs(b.v, *t):
			c.report(EInputs, xs, fmt.Sprintf("%s is declared %s; %s is a %s", name, t, x.Var, b.v.describe()), extra{required: t.String(), actual: b.v.describe()})
			c.assign(e, name, errVal)
			return
		case t.Value != "" && (b.v.k != vValue || !compat(t.Value, b.v.vt)):
			c.report(EInputs, xs, fmt.Sprintf("%s is declared %s; %s is a %s", name, t, x.Var, b.v.describe()), extra{required: t.String(), actual: b.v.describe()})
			c.assign(e, name, errVal)
			return
		}
	}
	v := b.v
	if v.affine() {
		c.consume(e, x.Var, xs)
	}
	nv := *v
	nv.origin = sp
	c.assign(e, name, &nv)
}

func typeIs(v *val, t Type) bool {
	switch {
	case t.Handle != "":
		return v.k == vHandle && v.kind == t.Handle
	case t.Permit != "":
		return v.k == vPermit && v.op == t.Permit
	case t.Proposal != "":
		return v.k == vProposal && v.op == t.Proposal
	}
	return v.k == vValue && compat(t.Value, v.vt)
}

func (c *checker) match(e *env, s *Stmt) {
	sp := *s.Span
	names := e.names()
	x := s.On
	xs := exprSpan(x, sp)
	var out *val
	if x.Var == "" {
		if litType(x.Lit) == "bool" {
			c.report(EBoolean, xs, "a Bool is not a tagged outcome: matching it cannot narrow anything")
		} else {
			c.report(EForged, xs, "a literal is not an outcome of a trusted operation")
		}
	} else if b := c.use(e, x, sp, false); b != nil {
		switch {
		case b.v.k == vOutcome:
			out = b.v
			if out.affine() {
				c.consume(e, x.Var, xs)
			}
		case b.v.k == vValue && b.v.vt == "bool":
			c.report(EBoolean, xs, fmt.Sprintf("%s is a Bool, not a tagged outcome: matching it cannot narrow a resource (a legacy approval is not a permit)", x.Var))
		case b.v.k == vValue:
			c.report(EForged, xs, fmt.Sprintf("%s is ordinary data (%s), not the outcome of a trusted operation: a tag inside data decides nothing", x.Var, b.v.vt))
		default:
			c.report(EInputs, xs, fmt.Sprintf("%s is a %s, not an outcome", x.Var, b.v.describe()))
		}
	}
	seen := map[string]bool{}
	var exits []*env
	for _, a := range s.Arms {
		as := *a.Span
		if seen[a.Tag] {
			c.report(EArm, as, fmt.Sprintf("a second arm for %s", a.Tag))
			continue
		}
		seen[a.Tag] = true
		var tv *tagVal
		if out != nil {
			if tv = out.tag(a.Tag); tv == nil {
				c.report(EArm, as, fmt.Sprintf("%s cannot end with %s", x.Var, a.Tag))
				continue
			}
		}
		ae := e.clone()
		keep := ae.names()
		c.bindFields(ae, tv, a.Bind, as)
		c.block(ae, a.Body)
		ae.drop(keep)
		exits = append(exits, ae)
	}
	if out != nil {
		var missing []string
		for _, t := range out.tags {
			if !seen[t.tag] {
				missing = append(missing, t.tag)
			}
		}
		if len(missing) > 0 {
			var all []string
			for _, t := range out.tags {
				all = append(all, t.tag)
			}
			c.report(ENonExhaustive, sp, fmt.Sprintf("the match does not handle %s", strings.Join(missing, ", ")),
				extra{required: strings.Join(all, " | "), actual: strings.Join(sortedKeys(seen), " | ")})
		}
	}
	if len(exits) == 0 {
		return
	}
	*e = *c.join(exits, names, sp)
}

// invariant compares the outer affine bindings at loop entry with those at
// the end of the body (or at a retried outcome) and reports what would
// break on the next iteration.
func (c *checker) invariant(e0, e1 *env, names []string, check func(name string, b0, b1 *binding)) {
	if !e1.live {
		return
	}
	for _, n := range names {
		b0, b1 := e0.vars[n], e1.vars[n]
		if b0 == nil || b1 == nil || b0.st != avail || !b0.v.affine() || b1.v.k == vErr {
			continue
		}
		if b1.st != avail || !sameShape(b0.v, b1.v) {
			check(n, b0, b1)
		}
	}
}

func (c *checker) loopBody(e *env, s *Stmt) {
	keep := e.names()
	if s.Over != nil {
		c.assign(e, s.Item, &val{k: vValue, vt: "data", vid: c.freshVid(), origin: exprSpan(s.Over, *s.Span)})
	}
	c.block(e, s.Body)
	e.drop(keep)
}

func (c *checker) loop(e *env, s *Stmt) {
	sp := *s.Span
	names := e.names()
	if s.Over != nil {
		c.valueOf(e, s.Over, sp, "list", "a loop's list")
	}
	// First pass, silent: what one iteration does to the loop's state.
	c.mute++
	c.pushFrame()
	e1 := e.clone()
	c.loopBody(e1, s)
	c.popFrame()
	c.mute--
	broken := map[string]bool{}
	c.invariant(e, e1, names, func(n string, b0, b1 *binding) {
		broken[n] = true
		if b1.st != avail {
			c.report(ELoopConsumes, b1.at, fmt.Sprintf("%s is consumed in the loop body; a later iteration would use it again", n), related(rel(sp, "the loop")))
			return
		}
		c.report(ELoopInvariant, sp, fmt.Sprintf("the loop body changes %s from %s to %s: the loop does not preserve its resource invariant at the back edge", n, b0.v.describe(), b1.v.describe()),
			extra{required: b0.v.state, actual: b1.v.state, related: []Related{rel(b1.v.origin, "changed here")}})
	})
	head := c.join([]*env{e, e1}, names, sp)
	for n := range broken {
		nb := *e.vars[n]
		head.vars[n] = &nb
	}
	// Second pass from the loop head: the diagnostics of the body.
	e2 := head.clone()
	c.loopBody(e2, s)
	out := c.join([]*env{head, e2}, names, sp)
	for n := range broken {
		out.vars[n] = &binding{v: e.vars[n].v, st: poisoned, at: sp, why: "the loop body does not preserve it", related: []Related{rel(sp, "the loop")}}
	}
	*e = *out
}

func (c *checker) retry(e *env, s *Stmt) {
	sp := *s.Span
	names := e.names()
	c.retryDepth++
	c.mute++
	f1 := c.pushFrame()
	e1 := e.clone()
	c.block(e1, s.Body)
	c.popFrame()
	c.mute--
	broken := map[string]bool{}
	envs := []*env{e}
	for _, r := range f1.raises {
		envs = append(envs, r.env)
		c.invariant(e, r.env, names, func(n string, b0, b1 *binding) {
			broken[n] = true
			if b1.st != avail {
				c.report(EUnsafeRetry, r.span, fmt.Sprintf("when this call ends %s the retry runs the body again, but %s is consumed by then", r.tag, n), related(rel(b1.at, "consumed here")))
				return
			}
			c.report(EUnsafeRetry, r.span, fmt.Sprintf("when this call ends %s the retry runs the body again, but %s is then %s, not %s", r.tag, n, b1.v.describe(), b0.v.describe()))
		})
	}
	head := c.join(envs, names, sp)
	for n := range broken {
		nb := *e.vars[n]
		head.vars[n] = &nb
	}
	f2 := c.pushFrame()
	e2 := head.clone()
	c.block(e2, s.Body)
	c.popFrame()
	c.retryDepth--
	for _, r := range f2.raises {
		c.raise(r)
	}
	for n := range broken {
		e2.vars[n] = &binding{v: e.vars[n].v, st: poisoned, at: sp, why: "the retry does not preserve it", related: []Related{rel(sp, "the retry")}}
	}
	*e = *e2
}

func (c *checker) try(e *env, s *Stmt) {
	sp := *s.Span
	names := e.names()
	f := c.pushFrame()
	eb := e.clone()
	c.block(eb, s.Body)
	c.popFrame()
	arms := map[string]*Arm{}
	var order []*Arm
	for _, a := range s.Catch {
		if arms[a.Tag] != nil {
			c.report(EArm, *a.Span, fmt.Sprintf("a second catch clause for %s", a.Tag))
			continue
		}
		arms[a.Tag] = a
		order = append(order, a)
	}
	groups := map[string][]raise{}
	for _, r := range f.raises {
		if arms[r.tag] != nil {
			groups[r.tag] = append(groups[r.tag], r)
		} else {
			c.raise(r)
		}
	}
	exits := []*env{eb}
	for _, a := range order {
		as := *a.Span
		rs := groups[a.Tag]
		if len(rs) == 0 {
			c.report(EDeadCatch, as, fmt.Sprintf("nothing in the try body can end with %s", a.Tag))
			continue
		}
		var envs []*env
		for _, r := range rs {
			envs = append(envs, r.env)
		}
		ae := c.join(envs, names, as)
		keep := ae.names()
		for _, fname := range sortedKeys(a.Bind) {
			var vals []*val
			var cur []bool
			for _, r := range rs {
				if v := r.tv.field(fname); v != nil {
					vals = append(vals, v)
					cur = append(cur, !r.env.stale(v))
				}
			}
			switch {
			case len(vals) != len(rs):
				c.report(EArm, as, fmt.Sprintf("outcome %s has no field %s", a.Tag, fname))
				c.assign(ae, a.Bind[fname], errVal)
			default:
				if v := c.merge(vals, cur, as, ae); v != nil {
					nv := *v
					nv.origin = as
					c.assign(ae, a.Bind[fname], &nv)
				} else {
					ae.put(a.Bind[fname], &binding{v: vals[0], st: poisoned, at: as, why: "the calls that end " + a.Tag + " give it different values"})
				}
			}
		}
		c.block(ae, a.Body)
		ae.drop(keep)
		exits = append(exits, ae)
	}
	*e = *c.join(exits, names, sp)
}

func (c *checker) fallback(e *env, s *Stmt) {
	sp := *s.Span
	p := s.Primary
	var out *val
	if p.Kind == KCall {
		out = c.callVal(e, p)
	} else {
		out = c.requestApprovalVal(e, p)
	}
	name := s.Bind.Name
	res := errVal
	if out.k == vOutcome {
		var succ []*tagVal
		for _, t := range out.tags {
			if t.class == ClassSuccess {
				succ = append(succ, t)
			}
		}
		switch {
		case len(succ) != 1:
			c.report(EUnhandled, *p.Span, fmt.Sprintf("a fallback needs one success outcome; this call has %d", len(succ)))
		case succ[0].field(s.Field) == nil:
			c.report(EArm, sp, fmt.Sprintf("outcome %s has no field %s", succ[0].tag, s.Field))
		default:
			res = succ[0].field(s.Field)
		}
	}
	os := exprSpan(s.Otherwise, sp)
	if res.affine() {
		c.report(EFallback, os, fmt.Sprintf("%s is a %s; a fallback value cannot stand in for it", s.Field, res.describe()), extra{required: res.describe()})
		c.assign(e, name, errVal)
		return
	}
	want := ""
	if res.k == vValue {
		want = res.vt
	}
	vt, _ := c.valueOf(e, s.Otherwise, sp, want, "the fallback value")
	if res.k == vErr || vt == "" {
		c.assign(e, name, errVal)
		return
	}
	c.assign(e, name, &val{k: vValue, vt: res.vt, vid: c.freshVid(), origin: sp})
}

type branchRun struct {
	env *env
	tr  *tracker
	f   *frame
}

func (c *checker) parallel(e *env, s *Stmt) {
	sp := *s.Span
	names := e.names()
	outer := map[string]bool{}
	for _, n := range names {
		outer[n] = true
	}
	race := s.Kind == KRace
	var runs []branchRun
	for _, br := range s.Branches {
		tr := &tracker{outer: outer, touches: map[string]touch{}}
		c.trackers = append(c.trackers, tr)
		f := c.pushFrame()
		c.parDepth++
		if race {
			c.raceDepth++
		}
		be := e.clone()
		c.block(be, br.Body)
		if race {
			c.raceDepth--
		}
		c.parDepth--
		c.popFrame()
		c.trackers = c.trackers[:len(c.trackers)-1]
		runs = append(runs, branchRun{env: be, tr: tr, f: f})
	}
	reported := map[string]bool{}
	for j := 1; j < len(runs); j++ {
		for _, n := range runs[j].tr.order {
			tj := runs[j].tr.touches[n]
			for i := 0; i < j && !reported[n]; i++ {
				ti, ok := runs[i].tr.touches[n]
				b0 := e.vars[n]
				// Section 9 asks disjointness of owned handles and
				// one-shot permits only: an ordinary value one branch
				// rebinds and another reads is no conflict (each branch
				// runs on its own copy). Two branches rebinding one name
				// would leave it ambiguous afterwards, so that still is.
				if !ok || b0 == nil || b0.v.k == vErr || !(b0.v.affine() || (ti.write && tj.write)) {
					continue
				}
				reported[n] = true
				c.report(EParallelCapture, tj.span, fmt.Sprintf("%s (a %s) is captured by two parallel branches", n, b0.v.describe()), related(rel(ti.span, "captured here by an earlier branch")))
			}
		}
	}
	// Revisions any branch made are made on every path out of the scope
	// (a cancelled branch of a race may have got that far too).
	maxRevs := func(into *env) {
		for _, r := range runs {
			for res, rev := range r.env.revs {
				if rev > into.revs[res] {
					into.revs[res], into.revAt[res] = rev, r.env.revAt[res]
				}
			}
		}
	}
	for i, r := range runs {
		for _, rz := range r.f.raises {
			renv := rz.env.clone()
			maxRevs(renv)
			for j, o := range runs {
				if j == i {
					continue
				}
				for _, n := range o.tr.order {
					if b := renv.vars[n]; b != nil {
						renv.vars[n] = &binding{v: b.v, st: poisoned, at: sp, why: "another branch of the parallel scope may have used it", related: []Related{rel(o.tr.touches[n].span, "used here")}}
					}
				}
			}
			rz.env = renv
			c.raise(rz)
		}
	}
	out := e.clone()
	maxRevs(out)
	if race {
		// The winner is not known, and the losers stop wherever they were
		// cancelled: whatever a branch touched (but a value it only read)
		// is not owned after the race.
		live := false
		for _, r := range runs {
			live = live || r.env.live
		}
		out.live = live
		for _, n := range names {
			for _, r := range runs {
				t, ok := r.tr.touches[n]
				b0 := e.vars[n]
				if !ok || (!t.write && !b0.v.affine()) {
					continue
				}
				out.vars[n] = &binding{v: b0.v, st: poisoned, at: sp, why: "a branch of the race touched it, and the race's winner is not known", related: []Related{rel(t.span, "touched here")}}
				break
			}
		}
		*e = *out
		return
	}
	for _, r := range runs {
		out.live = out.live && r.env.live
	}
	for _, n := range names {
		for _, r := range runs {
			if _, ok := r.tr.touches[n]; ok {
				if b := r.env.vars[n]; b != nil {
					nb := *b
					out.vars[n] = &nb
				}
				break
			}
		}
	}
	*e = *out
}

func (c *checker) parallelMap(e *env, s *Stmt) {
	sp := *s.Span
	names := e.names()
	c.valueOf(e, s.Over, sp, "list", "a parallel map's list")
	outer := map[string]bool{}
	for _, n := range names {
		outer[n] = true
	}
	tr := &tracker{outer: outer, touches: map[string]touch{}}
	c.trackers = append(c.trackers, tr)
	f := c.pushFrame()
	c.parDepth++
	be := e.clone()
	c.assign(be, s.Item, &val{k: vValue, vt: "data", vid: c.freshVid(), origin: exprSpan(s.Over, sp)})
	c.block(be, s.Body)
	c.parDepth--
	c.popFrame()
	c.trackers = c.trackers[:len(c.trackers)-1]
	for _, n := range tr.order {
		t := tr.touches[n]
		b0 := e.vars[n]
		if b0 == nil || b0.v.k == vErr || !(b0.v.affine() || t.write) {
			continue
		}
		c.report(EParallelMapDup, t.span, fmt.Sprintf("%s (a %s) would be used by every item of the parallel map at once", n, b0.v.describe()))
	}
	for _, r := range f.raises {
		c.raise(r)
	}
}

func (c *checker) agent(e *env, s *Stmt) {
	sp := *s.Span
	a := c.agents[s.Agent]
	if a == nil {
		c.report(EUnknownDecl, sp, fmt.Sprintf("%s is not a declared agent", s.Agent))
	} else {
		var all, outside, writers []string
		seen := map[string]bool{}
		for _, t := range a.Tools {
			op := c.ops[t]
			if op == nil {
				continue
			}
			for _, ef := range op.Effects {
				c.effects[ef] = true
				if !seen[ef] {
					seen[ef] = true
					all = append(all, ef)
				}
				if !c.ceiling[ef] && !contains(outside, ef) {
					outside = append(outside, ef)
				}
			}
			if contains(op.Effects, "external_write") {
				writers = append(writers, t)
			}
		}
		if len(outside) > 0 {
			var tools []string
			for _, t := range a.Tools {
				if op := c.ops[t]; op != nil {
					for _, ef := range op.Effects {
						if contains(outside, ef) && !contains(tools, t) {
							tools = append(tools, t)
						}
					}
				}
			}
			c.report(EToolSetCeiling, sp, fmt.Sprintf("agent %s may select %s, which can perform %s outside the effect ceiling", a.Name, strings.Join(tools, ", "), strings.Join(outside, ", ")),
				extra{required: strings.Join(c.wf.EffectCeiling, ", "), actual: strings.Join(all, ", "), related: []Related{rel(*a.Span, "the agent's tool set")}})
		}
		if c.raceDepth > 0 && len(writers) > 0 {
			c.report(EProtectedRace, sp, fmt.Sprintf("agent %s may select %s, a protected external write, inside a race", a.Name, strings.Join(writers, ", ")))
		}
	}
	for _, x := range s.Input {
		c.valueOf(e, x, sp, "", "a model's input")
	}
	if s.Bind != nil {
		c.assign(e, s.Bind.Name, &val{k: vValue, vt: "data", vid: c.freshVid(), origin: sp})
	}
}

// --- joins ---------------------------------------------------------------------

// join merges the environments of the paths that reach one point (the end
// of a conditional, a match, a try, a loop head) over the names visible
// there. A binding survives only when every reachable path agrees on it;
// otherwise it is not owned after the join, and a later use says why.
func (c *checker) join(envs []*env, names []string, at Span) *env {
	var live []*env
	for _, e := range envs {
		if e.live {
			live = append(live, e)
		}
	}
	out := newEnv()
	if len(live) == 0 {
		out.live = false
		return out
	}
	for _, e := range live {
		for res, rev := range e.revs {
			if cur, ok := out.revs[res]; !ok || rev > cur {
				out.revs[res], out.revAt[res] = rev, e.revAt[res]
			}
		}
	}
	for _, n := range names {
		var bs []*binding
		var cur []bool
		for _, e := range live {
			if b := e.vars[n]; b != nil {
				bs = append(bs, b)
				cur = append(cur, !e.stale(b.v))
			}
		}
		if len(bs) != len(live) {
			continue
		}
		out.put(n, c.joinBindings(bs, cur, at, out))
	}
	return out
}

func (c *checker) joinBindings(bs []*binding, cur []bool, at Span, out *env) *binding {
	sts := map[status]int{}
	for _, b := range bs {
		sts[b.st]++
	}
	if sts[avail] == len(bs) {
		var vals []*val
		for _, b := range bs {
			vals = append(vals, b.v)
		}
		if v := c.merge(vals, cur, at, out); v != nil {
			return &binding{v: v, st: avail}
		}
		var rs []Related
		for _, v := range vals {
			rs = append(rs, rel(v.origin, "a %s on this path", v.describe()))
		}
		return &binding{v: vals[0], st: poisoned, at: at, related: append([]Related{rel(at, "the paths join here")}, rs...),
			why: fmt.Sprintf("the paths that join at %s leave it differently (%s here, %s on another path)", at, vals[0].describe(), differing(vals).describe())}
	}
	if sts[consumed] == len(bs) || sts[poisoned] == len(bs) {
		nb := *bs[0]
		return &nb
	}
	rs := []Related{rel(at, "the paths join here")}
	for _, b := range bs {
		switch b.st {
		case consumed:
			rs = append(rs, rel(b.at, "consumed here on one path"))
		case poisoned:
			rs = append(rs, rel(b.at, "not owned after this point on one path"))
		case avail:
			rs = append(rs, rel(b.v.origin, "still owned on another path"))
		}
	}
	return &binding{v: bs[0].v, st: poisoned, at: at, related: rs,
		why: fmt.Sprintf("it is consumed on some paths that join at %s and owned on others", at)}
}

func differing(vals []*val) *val {
	for _, v := range vals[1:] {
		if !equalVal(v, vals[0]) {
			return v
		}
	}
	return vals[0]
}

// merge returns the value every path agrees on, a fresh identity for values
// that differ only in identity (and a fresh revision for a handle whose
// revision differs but is current on every path), or nil when the paths
// disagree. cur says, per path, whether a handle is its resource's current
// revision there: one that is stale on some path stays stale.
func (c *checker) merge(vals []*val, cur []bool, at Span, out *env) *val {
	same := true
	for _, v := range vals[1:] {
		if !equalVal(v, vals[0]) {
			same = false
		}
	}
	if same {
		return vals[0]
	}
	// A value an earlier diagnostic concerns stands for nothing: the other
	// paths decide (so that a silent first pass over a loop body cannot
	// silence the second).
	var known []*val
	var kcur []bool
	for i, v := range vals {
		if v.k != vErr {
			known = append(known, v)
			kcur = append(kcur, cur[i])
		}
	}
	if len(known) == 0 {
		return errVal
	}
	if len(known) < len(vals) {
		return c.merge(known, kcur, at, out)
	}
	first := vals[0]
	for _, v := range vals[1:] {
		if v.k != first.k {
			return nil
		}
		switch first.k {
		case vValue:
			if v.vt != first.vt {
				return nil
			}
		case vHandle:
			if v.kind != first.kind || v.state != first.state || v.res != first.res {
				return nil
			}
		default:
			return nil
		}
	}
	if first.k == vValue {
		return &val{k: vValue, vt: first.vt, vid: c.freshVid(), origin: at}
	}
	for i, ok := range cur {
		if !ok {
			return vals[i]
		}
	}
	r := c.freshRev()
	out.revs[first.res], out.revAt[first.res] = r, at
	return &val{k: vHandle, kind: first.kind, state: first.state, res: first.res, rev: r, origin: at}
}
