// Package checker is the reference implementation of the AGL protocol and
// ownership checker over the workflow IR agl-workflow/1 (docs/agl-binding.md
// §11, schemas/agl/workflow.json): the static judgment of the proposal's
// section 5.2, Γ ; Δ ; C ⊢ e : τ ! ε ▷ Δ'. It tracks ordinary values (Γ),
// owned resource handles and affine permits (Δ) through sequences, joins,
// loops, try/catch, fallbacks and parallel scopes, checks every call against
// its declaration and the available authority (C), bounds the effects (ε),
// and reports what is available after (Δ') or diagnostics with stable codes
// and source spans.
//
// The package is pure: Check is a function of the IR alone, deterministic,
// and knows nothing of any host state. A certificate it leads to is a
// statement about the workflow, never an authorization to execute it.
package checker

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
)

// IRVersion is the version of the workflow IR this checker reads.
const IRVersion = "agl-workflow/1"

// Version names this checker; it goes into every certificate.
const Version = "parley-refhost-checker/1"

// Limits on a workflow, so that a hostile document cannot exhaust the host.
const (
	MaxNesting    = 12   // nested blocks
	MaxStatements = 4000 // statements in all
)

// Span is a region of the workflow's source: 1-based lines and columns, the
// end exclusive. Every node carries one.
type Span struct {
	Line    int `json:"line"`
	Col     int `json:"col"`
	EndLine int `json:"end_line"`
	EndCol  int `json:"end_col"`
}

func (s Span) String() string { return fmt.Sprintf("%d:%d-%d:%d", s.Line, s.Col, s.EndLine, s.EndCol) }

func (s Span) less(o Span) bool {
	if s.Line != o.Line {
		return s.Line < o.Line
	}
	if s.Col != o.Col {
		return s.Col < o.Col
	}
	if s.EndLine != o.EndLine {
		return s.EndLine < o.EndLine
	}
	return s.EndCol < o.EndCol
}

// Workflow is one agl-workflow/1 document.
type Workflow struct {
	IRVersion     string       `json:"ir_version"`
	Name          string       `json:"name"`
	Source        string       `json:"source,omitempty"`
	Span          *Span        `json:"span"`
	Protocols     []*Protocol  `json:"protocols"`
	Operations    []*Operation `json:"operations"`
	Agents        []*Agent     `json:"agents"`
	Authority     []string     `json:"authority"`
	EffectCeiling []string     `json:"effect_ceiling"`
	Params        []*Param     `json:"params"`
	Body          []*Stmt      `json:"body"`
}

// Protocol is a finite resource protocol: the states of a resource kind,
// the transitions operations may make, and the two transitions the
// primitives propose and request_approval make.
type Protocol struct {
	Kind        string        `json:"kind"`
	States      []string      `json:"states"`
	Initial     string        `json:"initial"`
	Transitions []*Transition `json:"transitions"`
	Propose     *Transition   `json:"propose,omitempty"`
	Approval    *ApprovalStep `json:"approval,omitempty"`
	Span        *Span         `json:"span"`
}

// Transition is one edge of a protocol.
type Transition struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// ApprovalStep is what a human decision does to a proposed resource.
type ApprovalStep struct {
	From    string `json:"from"`
	Granted string `json:"granted"`
	Denied  string `json:"denied"`
}

// Operation is a declared operation: the contract the checker holds every
// call to.
type Operation struct {
	Name       string     `json:"name"`
	Inputs     []*Input   `json:"inputs"`
	Authority  []string   `json:"authority"`
	Effects    []string   `json:"effects"`
	Approval   bool       `json:"approval"`
	Idempotent bool       `json:"idempotent"`
	Outcomes   []*Outcome `json:"outcomes"`
	Span       *Span      `json:"span"`
}

// Input is one declared input. A handle input names the states it accepts;
// it is consumed by the call unless it is borrowed.
type Input struct {
	Name     string   `json:"name"`
	Type     Type     `json:"type"`
	States   []string `json:"states,omitempty"`
	Borrow   bool     `json:"borrow,omitempty"`
	Optional bool     `json:"optional,omitempty"`
}

// Outcome classes.
const (
	ClassSuccess   = "success"
	ClassNoEffect  = "no_effect"
	ClassUncertain = "uncertain"
	ClassDenied    = "denied" // request_approval's Denied
)

// Outcome is one tagged outcome of an operation.
type Outcome struct {
	Tag    string   `json:"tag"`
	Class  string   `json:"class"`
	Fields []*Field `json:"fields"`
}

// Field is one field of an outcome. A handle field either returns a handle
// input (From) at the same revision in a new state, or a new revision of it
// (Revision "new"), or, without From, a resource the operation created.
type Field struct {
	Name     string `json:"name"`
	Type     Type   `json:"type"`
	State    string `json:"state,omitempty"`
	From     string `json:"from,omitempty"`
	Revision string `json:"revision,omitempty"`
}

// Agent is a model-driven step and the tools it may select.
type Agent struct {
	Name  string   `json:"name"`
	Tools []string `json:"tools"`
	Span  *Span    `json:"span"`
}

// Param is an input of the workflow: a value, a handle in a state, or a
// permit bound to handle params (Binds: operation input → param).
type Param struct {
	Name  string            `json:"name"`
	Type  Type              `json:"type"`
	State string            `json:"state,omitempty"`
	Binds map[string]string `json:"binds,omitempty"`
	Span  *Span             `json:"span"`
}

// Value types.
var valueTypes = map[string]bool{"bool": true, "int": true, "string": true, "list": true, "data": true}

// Type is a value type ("bool", "int", "string", "list", "data") or one of
// {"handle": kind}, {"permit": operation}, {"proposal": operation}.
type Type struct {
	Value    string
	Handle   string
	Permit   string
	Proposal string
}

func (t Type) String() string {
	switch {
	case t.Handle != "":
		return "handle " + t.Handle
	case t.Permit != "":
		return "permit " + t.Permit
	case t.Proposal != "":
		return "proposal " + t.Proposal
	}
	return t.Value
}

// UnmarshalJSON reads either form.
func (t *Type) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		if !valueTypes[s] {
			return fmt.Errorf("unknown value type %q", s)
		}
		*t = Type{Value: s}
		return nil
	}
	var m map[string]string
	if err := strictUnmarshal(b, &m); err != nil || len(m) != 1 {
		return errors.New(`a type is a value type name or one of {"handle": kind}, {"permit": operation}, {"proposal": operation}`)
	}
	for k, v := range m {
		if v == "" {
			return fmt.Errorf("%s names nothing", k)
		}
		switch k {
		case "handle":
			*t = Type{Handle: v}
		case "permit":
			*t = Type{Permit: v}
		case "proposal":
			*t = Type{Proposal: v}
		default:
			return fmt.Errorf("unknown type constructor %q", k)
		}
	}
	return nil
}

// MarshalJSON writes the form UnmarshalJSON reads.
func (t Type) MarshalJSON() ([]byte, error) {
	switch {
	case t.Handle != "":
		return json.Marshal(map[string]string{"handle": t.Handle})
	case t.Permit != "":
		return json.Marshal(map[string]string{"permit": t.Permit})
	case t.Proposal != "":
		return json.Marshal(map[string]string{"proposal": t.Proposal})
	}
	return json.Marshal(t.Value)
}

// Expr is a variable or a literal value.
type Expr struct {
	Var  string
	Lit  json.RawMessage
	Span *Span
}

// UnmarshalJSON reads {"var": name} or {"lit": value}, each with an optional span.
func (x *Expr) UnmarshalJSON(b []byte) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return errors.New(`an expression is {"var": name} or {"lit": value}`)
	}
	for k := range m {
		if k != "var" && k != "lit" && k != "span" {
			return fmt.Errorf("unknown expression member %q", k)
		}
	}
	v, hasVar := m["var"]
	l, hasLit := m["lit"]
	if hasVar == hasLit {
		return errors.New(`an expression has exactly one of "var" and "lit"`)
	}
	if hasVar {
		if err := json.Unmarshal(v, &x.Var); err != nil || x.Var == "" {
			return errors.New(`"var" is a non-empty name`)
		}
	} else {
		x.Lit = append(json.RawMessage(nil), l...)
	}
	if s, ok := m["span"]; ok {
		x.Span = &Span{}
		if err := strictUnmarshal(s, x.Span); err != nil {
			return fmt.Errorf("span: %v", err)
		}
	}
	return nil
}

// MarshalJSON writes the form UnmarshalJSON reads.
func (x Expr) MarshalJSON() ([]byte, error) {
	m := map[string]any{}
	if x.Var != "" {
		m["var"] = x.Var
	} else {
		m["lit"] = x.Lit
	}
	if x.Span != nil {
		m["span"] = x.Span
	}
	return json.Marshal(m)
}

// Bind is where a statement puts its result: one name, or (for a call's
// single success outcome, or request_approval's Granted) its fields by name.
type Bind struct {
	Name   string
	Fields map[string]string
}

// UnmarshalJSON reads a name or an object field → name.
func (b *Bind) UnmarshalJSON(raw []byte) error {
	if json.Unmarshal(raw, &b.Name) == nil {
		if b.Name == "" {
			return errors.New("bind names nothing")
		}
		return nil
	}
	if err := strictUnmarshal(raw, &b.Fields); err != nil {
		return errors.New("bind is a name or an object mapping outcome fields to names")
	}
	for f, n := range b.Fields {
		if f == "" || n == "" {
			return errors.New("bind maps non-empty field names to non-empty names")
		}
	}
	return nil
}

// MarshalJSON writes the form UnmarshalJSON reads.
func (b Bind) MarshalJSON() ([]byte, error) {
	if b.Fields != nil {
		return json.Marshal(b.Fields)
	}
	return json.Marshal(b.Name)
}

// Statement kinds.
const (
	KCall            = "call"
	KPropose         = "propose"
	KRequestApproval = "request_approval"
	KLet             = "let"
	KIf              = "if"
	KMatch           = "match"
	KLoop            = "loop"
	KRetry           = "retry"
	KTry             = "try"
	KFallback        = "fallback"
	KParallel        = "parallel"
	KParallelMap     = "parallel_map"
	KRace            = "race"
	KAgent           = "agent"
	KReturn          = "return"
)

// Stmt is one statement; which members it has depends on its kind
// (schemas/agl/workflow.json).
type Stmt struct {
	Kind      string           `json:"kind"`
	Span      *Span            `json:"span"`
	Op        string           `json:"op,omitempty"`
	Args      map[string]*Expr `json:"args,omitempty"`
	Permit    *Expr            `json:"permit,omitempty"`
	Bind      *Bind            `json:"bind,omitempty"`
	Proposal  *Expr            `json:"proposal,omitempty"`
	Value     *Expr            `json:"value,omitempty"`
	Type      *Type            `json:"type,omitempty"`
	Cond      *Expr            `json:"cond,omitempty"`
	Then      []*Stmt          `json:"then,omitempty"`
	Else      []*Stmt          `json:"else,omitempty"`
	On        *Expr            `json:"on,omitempty"`
	Arms      []*Arm           `json:"arms,omitempty"`
	Body      []*Stmt          `json:"body,omitempty"`
	Over      *Expr            `json:"over,omitempty"`
	Item      string           `json:"item,omitempty"`
	Attempts  int              `json:"attempts,omitempty"`
	Catch     []*Arm           `json:"catch,omitempty"`
	Primary   *Stmt            `json:"primary,omitempty"`
	Field     string           `json:"field,omitempty"`
	Otherwise *Expr            `json:"otherwise,omitempty"`
	Branches  []*Branch        `json:"branches,omitempty"`
	Agent     string           `json:"agent,omitempty"`
	Input     []*Expr          `json:"input,omitempty"`
}

// Arm is a match arm or a catch clause: an outcome tag, the fields it binds,
// and its body.
type Arm struct {
	Tag  string            `json:"tag"`
	Bind map[string]string `json:"bind,omitempty"`
	Body []*Stmt           `json:"body"`
	Span *Span             `json:"span"`
}

// Branch is one branch of a parallel scope or a race.
type Branch struct {
	Body []*Stmt `json:"body"`
	Span *Span   `json:"span"`
}

// InvalidError is a document that is not an agl-workflow/1 workflow at all
// (as opposed to a workflow that does not check, which gets diagnostics).
type InvalidError struct {
	// Unsupported is set when the document declares another IR version.
	Unsupported bool
	Path        string
	Msg         string
}

func (e *InvalidError) Error() string {
	if e.Path == "" {
		return e.Msg
	}
	return e.Path + ": " + e.Msg
}

func strictUnmarshal(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data")
	}
	return nil
}

// Decode reads and validates the structure of a workflow document. Unknown
// members anywhere are refused, so that nothing the checker would ignore can
// ride along in a certified document.
func Decode(b []byte) (*Workflow, error) {
	var head struct {
		IRVersion *string `json:"ir_version"`
	}
	if err := json.Unmarshal(b, &head); err != nil {
		return nil, &InvalidError{Msg: "not a JSON object: " + err.Error()}
	}
	if head.IRVersion == nil {
		return nil, &InvalidError{Path: "/ir_version", Msg: "missing"}
	}
	if *head.IRVersion != IRVersion {
		return nil, &InvalidError{Unsupported: true, Path: "/ir_version", Msg: fmt.Sprintf("%q is not %s, the only version this checker reads", *head.IRVersion, IRVersion)}
	}
	var wf Workflow
	if err := strictUnmarshal(b, &wf); err != nil {
		return nil, &InvalidError{Msg: err.Error()}
	}
	var generic map[string]any
	if err := json.Unmarshal(b, &generic); err != nil {
		return nil, &InvalidError{Msg: err.Error()}
	}
	if err := requireMembers("", generic, "workflow"); err != nil {
		return nil, err
	}
	v := &validator{}
	v.workflow(&wf)
	if v.err != nil {
		return nil, v.err
	}
	return &wf, nil
}

type validator struct {
	err   *InvalidError
	count int
}

func (v *validator) fail(path, format string, a ...any) {
	if v.err == nil {
		v.err = &InvalidError{Path: path, Msg: fmt.Sprintf(format, a...)}
	}
}

func (v *validator) span(path string, s *Span) {
	switch {
	case s == nil:
		v.fail(path+"/span", "every node carries a span")
	case s.Line < 1 || s.Col < 1 || s.EndLine < s.Line || (s.EndLine == s.Line && s.EndCol < s.Col):
		v.fail(path+"/span", "a span starts at line and column 1 or later and does not end before it starts")
	}
}

func (v *validator) name(path, s string) {
	if s == "" {
		v.fail(path, "a name is required")
	}
}

func (v *validator) expr(path string, x *Expr, required bool) {
	if x == nil {
		if required {
			v.fail(path, "required")
		}
		return
	}
	if x.Span != nil {
		v.span(path, x.Span)
	}
}

func (v *validator) workflow(wf *Workflow) {
	v.name("/name", wf.Name)
	v.span("", wf.Span)
	for i, p := range wf.Protocols {
		path := fmt.Sprintf("/protocols/%d", i)
		if p == nil {
			v.fail(path, "null")
			continue
		}
		v.name(path+"/kind", p.Kind)
		v.span(path, p.Span)
		for j, t := range p.Transitions {
			if t == nil {
				v.fail(fmt.Sprintf("%s/transitions/%d", path, j), "null")
			}
		}
	}
	for i, op := range wf.Operations {
		path := fmt.Sprintf("/operations/%d", i)
		if op == nil {
			v.fail(path, "null")
			continue
		}
		v.name(path+"/name", op.Name)
		v.span(path, op.Span)
		for j, in := range op.Inputs {
			if in == nil {
				v.fail(fmt.Sprintf("%s/inputs/%d", path, j), "null")
				continue
			}
			v.name(fmt.Sprintf("%s/inputs/%d/name", path, j), in.Name)
		}
		for j, o := range op.Outcomes {
			if o == nil {
				v.fail(fmt.Sprintf("%s/outcomes/%d", path, j), "null")
				continue
			}
			v.name(fmt.Sprintf("%s/outcomes/%d/tag", path, j), o.Tag)
			switch o.Class {
			case ClassSuccess, ClassNoEffect, ClassUncertain:
			default:
				v.fail(fmt.Sprintf("%s/outcomes/%d/class", path, j), "class is success, no_effect or uncertain")
			}
			for k, f := range o.Fields {
				if f == nil {
					v.fail(fmt.Sprintf("%s/outcomes/%d/fields/%d", path, j, k), "null")
					continue
				}
				v.name(fmt.Sprintf("%s/outcomes/%d/fields/%d/name", path, j, k), f.Name)
				if f.Revision != "" && f.Revision != "same" && f.Revision != "new" {
					v.fail(fmt.Sprintf("%s/outcomes/%d/fields/%d/revision", path, j, k), "revision is same or new")
				}
			}
		}
	}
	for i, a := range wf.Agents {
		path := fmt.Sprintf("/agents/%d", i)
		if a == nil {
			v.fail(path, "null")
			continue
		}
		v.name(path+"/name", a.Name)
		v.span(path, a.Span)
	}
	for i, p := range wf.Params {
		path := fmt.Sprintf("/params/%d", i)
		if p == nil {
			v.fail(path, "null")
			continue
		}
		v.name(path+"/name", p.Name)
		v.span(path, p.Span)
	}
	if wf.Body == nil {
		v.fail("/body", "required")
	}
	v.block("/body", wf.Body, 0)
}

func (v *validator) block(path string, b []*Stmt, depth int) {
	if depth > MaxNesting {
		v.fail(path, "blocks nest deeper than %d", MaxNesting)
		return
	}
	for i, s := range b {
		v.stmt(fmt.Sprintf("%s/%d", path, i), s, depth)
	}
}

// members a statement of each kind may carry, beside kind and span.
var stmtMembers = map[string][]string{
	KCall:            {"op", "args", "permit", "bind"},
	KPropose:         {"op", "args", "bind"},
	KRequestApproval: {"proposal", "bind"},
	KLet:             {"bind", "value", "type"},
	KIf:              {"cond", "then", "else"},
	KMatch:           {"on", "arms"},
	KLoop:            {"body", "over", "item"},
	KRetry:           {"attempts", "body"},
	KTry:             {"body", "catch"},
	KFallback:        {"bind", "primary", "field", "otherwise"},
	KParallel:        {"branches"},
	KParallelMap:     {"over", "item", "body"},
	KRace:            {"branches"},
	KAgent:           {"agent", "input", "bind"},
	KReturn:          {"value"},
}

func (s *Stmt) present() map[string]bool {
	return map[string]bool{
		"op": s.Op != "", "args": s.Args != nil, "permit": s.Permit != nil, "bind": s.Bind != nil,
		"proposal": s.Proposal != nil, "value": s.Value != nil, "type": s.Type != nil, "cond": s.Cond != nil,
		"then": s.Then != nil, "else": s.Else != nil, "on": s.On != nil, "arms": s.Arms != nil,
		"body": s.Body != nil, "over": s.Over != nil, "item": s.Item != "", "attempts": s.Attempts != 0,
		"catch": s.Catch != nil, "primary": s.Primary != nil, "field": s.Field != "", "otherwise": s.Otherwise != nil,
		"branches": s.Branches != nil, "agent": s.Agent != "", "input": s.Input != nil,
	}
}

func (v *validator) stmt(path string, s *Stmt, depth int) {
	if s == nil {
		v.fail(path, "null")
		return
	}
	v.count++
	if v.count > MaxStatements {
		v.fail(path, "more than %d statements", MaxStatements)
		return
	}
	allowed, ok := stmtMembers[s.Kind]
	if !ok {
		v.fail(path+"/kind", "unknown statement kind %q", s.Kind)
		return
	}
	v.span(path, s.Span)
	for m, has := range s.present() {
		if has && !contains(allowed, m) {
			v.fail(path+"/"+m, "a %s statement has no member %q", s.Kind, m)
		}
	}
	for k, x := range s.Args {
		v.expr(path+"/args/"+k, x, true)
	}
	v.expr(path+"/permit", s.Permit, false)
	switch s.Kind {
	case KCall:
		v.name(path+"/op", s.Op)
	case KPropose:
		v.name(path+"/op", s.Op)
		if s.Bind != nil && s.Bind.Fields != nil {
			v.fail(path+"/bind", "a proposal binds one name")
		}
	case KRequestApproval:
		v.expr(path+"/proposal", s.Proposal, true)
	case KLet:
		v.expr(path+"/value", s.Value, true)
		if s.Bind == nil || s.Bind.Name == "" {
			v.fail(path+"/bind", "let binds one name")
		}
	case KIf:
		v.expr(path+"/cond", s.Cond, true)
		if s.Then == nil {
			v.fail(path+"/then", "required")
		}
		v.block(path+"/then", s.Then, depth+1)
		v.block(path+"/else", s.Else, depth+1)
	case KMatch:
		v.expr(path+"/on", s.On, true)
		if s.Arms == nil {
			v.fail(path+"/arms", "required")
		}
		v.arms(path+"/arms", s.Arms, depth)
	case KLoop:
		v.expr(path+"/over", s.Over, false)
		if (s.Over == nil) != (s.Item == "") {
			v.fail(path+"/item", "a loop over a list names its item, and only then")
		}
		v.body(path, s.Body, depth)
	case KRetry:
		if s.Attempts < 1 || s.Attempts > 100 {
			v.fail(path+"/attempts", "attempts is between 1 and 100")
		}
		v.body(path, s.Body, depth)
	case KTry:
		v.body(path, s.Body, depth)
		if s.Catch == nil {
			v.fail(path+"/catch", "required")
		}
		v.arms(path+"/catch", s.Catch, depth)
	case KFallback:
		if s.Bind == nil || s.Bind.Name == "" {
			v.fail(path+"/bind", "a fallback binds one name")
		}
		v.name(path+"/field", s.Field)
		v.expr(path+"/otherwise", s.Otherwise, true)
		switch {
		case s.Primary == nil:
			v.fail(path+"/primary", "required")
		case s.Primary.Kind != KCall && s.Primary.Kind != KRequestApproval:
			v.fail(path+"/primary/kind", "a fallback's primary is a call or a request_approval")
		case s.Primary.Bind != nil:
			v.fail(path+"/primary/bind", "the fallback binds the result, not its primary")
		default:
			v.stmt(path+"/primary", s.Primary, depth+1)
		}
	case KParallel, KRace:
		if len(s.Branches) < 2 {
			v.fail(path+"/branches", "at least two branches")
		}
		for i, b := range s.Branches {
			bp := fmt.Sprintf("%s/branches/%d", path, i)
			if b == nil {
				v.fail(bp, "null")
				continue
			}
			v.span(bp, b.Span)
			if b.Body == nil {
				v.fail(bp+"/body", "required")
			}
			v.block(bp+"/body", b.Body, depth+1)
		}
	case KParallelMap:
		v.expr(path+"/over", s.Over, true)
		v.name(path+"/item", s.Item)
		v.body(path, s.Body, depth)
	case KAgent:
		v.name(path+"/agent", s.Agent)
		for i, x := range s.Input {
			v.expr(fmt.Sprintf("%s/input/%d", path, i), x, true)
		}
		if s.Bind != nil && s.Bind.Fields != nil {
			v.fail(path+"/bind", "an agent binds one name")
		}
	case KReturn:
		v.expr(path+"/value", s.Value, false)
	}
	if s.Kind != KCall && s.Kind != KRequestApproval && s.Bind != nil && s.Bind.Fields != nil {
		v.fail(path+"/bind", "only a call or a request_approval binds outcome fields")
	}
}

func (v *validator) body(path string, b []*Stmt, depth int) {
	if b == nil {
		v.fail(path+"/body", "required")
	}
	v.block(path+"/body", b, depth+1)
}

func (v *validator) arms(path string, arms []*Arm, depth int) {
	for i, a := range arms {
		ap := fmt.Sprintf("%s/%d", path, i)
		if a == nil {
			v.fail(ap, "null")
			continue
		}
		v.name(ap+"/tag", a.Tag)
		v.span(ap, a.Span)
		if a.Body == nil {
			v.fail(ap+"/body", "required")
		}
		v.block(ap+"/body", a.Body, depth+1)
	}
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// required lists, per object of the IR, the members it must carry
// (schemas/agl/workflow.json), and where its nested objects are.
var required = map[string][]string{
	"workflow":  {"name", "span", "protocols", "operations", "agents", "authority", "effect_ceiling", "params", "body"},
	"protocol":  {"kind", "states", "initial", "span"},
	"operation": {"name", "inputs", "authority", "effects", "approval", "idempotent", "outcomes", "span"},
	"input":     {"name", "type"},
	"outcome":   {"tag", "class", "fields"},
	"field":     {"name", "type"},
	"agent":     {"name", "tools", "span"},
	"param":     {"name", "type", "span"},
}

var nested = map[string]map[string]string{
	"workflow":  {"protocols": "protocol", "operations": "operation", "agents": "agent", "params": "param"},
	"operation": {"inputs": "input", "outcomes": "outcome"},
	"outcome":   {"fields": "field"},
}

// requireMembers refuses a declaration that leaves out a member the IR
// requires (the struct decoding alone would read it as its zero value).
func requireMembers(path string, v any, what string) *InvalidError {
	m, ok := v.(map[string]any)
	if !ok {
		return &InvalidError{Path: path, Msg: "expected an object"}
	}
	for _, k := range required[what] {
		if _, ok := m[k]; !ok {
			return &InvalidError{Path: path + "/" + k, Msg: "required"}
		}
	}
	for k, sub := range nested[what] {
		list, _ := m[k].([]any)
		for i, e := range list {
			if err := requireMembers(fmt.Sprintf("%s/%s/%d", path, k, i), e, sub); err != nil {
				return err
			}
		}
	}
	return nil
}
