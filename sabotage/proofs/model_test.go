package proofs_test

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/parley-conformance/parley/models"
	"github.com/parley-conformance/parley/runner"
	"github.com/parley-conformance/parley/sabotage"
	"github.com/parley-conformance/parley/sabotage/sabotagetest"
	"github.com/parley-conformance/parley/scenarios"
	"github.com/parley-conformance/parley/target"
	"github.com/parley-conformance/parley/verdict"
)

// handWrittenHostEvents are the hand-written requirements about the
// durable host-event stream: what the model's own sabotage rules break.
const handWrittenHostEvents = "@req:openwop.hostevents.resume.after-last-event-id,@req:openwop.hostevents.fresh-subscription.replays,@req:openwop.requirement.0242.inbound.recorded,@req:openwop.requirement.0242.inbound.recorded.mcp"

// TestModelCatchesWhatHandWrittenScenariosMiss runs the host-event model's
// rules that only an order of operations shows: against each, every
// hand-written host-event scenario passes. (The matrix holds the model id
// to failing under each of these rules; the replay proof checks what a
// failing row says.)
func TestModelCatchesWhatHandWrittenScenariosMiss(t *testing.T) {
	t.Parallel() // mostly waiting on hosts: the proofs overlap
	if testing.Short() {
		t.Skip("runs the host-event scenarios three times")
	}
	reg, corpus := load(t)
	const id = "openwop.model.host-events"
	for _, variant := range []string{"cross-protocol-resume", "replay-window", "sticky-cursor"} {
		t.Run(variant, func(t *testing.T) {
			rule := ruleFor(t, id+"#"+variant)
			tgt := &sabotage.Target{Inner: target.NewRefhost(), Rule: rule}
			defer tgt.Close()
			onlyTheModelSees(t, context.Background(), reg, corpus, tgt, rule, handWrittenHostEvents)
		})
	}
}

// TestConcurrentSubscriptionsModelCatchesWhatHandWrittenScenariosMiss runs
// the rules of openwop.model.concurrent-subscriptions: hosts that lose a
// record on a stream opened (new, or resumed) while the record's exchange
// is being answered. Against each, every hand-written host-event scenario
// and the sequential host-event model pass (they make one call at a time),
// and the concurrent history is not linearizable.
func TestConcurrentSubscriptionsModelCatchesWhatHandWrittenScenariosMiss(t *testing.T) {
	t.Parallel() // mostly waiting on hosts: the proofs overlap
	if testing.Short() {
		t.Skip("runs the host-event scenarios twice against sabotaged hosts")
	}
	reg, corpus := load(t)
	const id = "openwop.model.concurrent-subscriptions"
	for _, variant := range []string{"new-stream-misses-in-flight", "resume-misses-in-flight"} {
		t.Run(variant, func(t *testing.T) {
			t.Parallel()
			rule := ruleFor(t, id+"#"+variant)
			tgt := &sabotage.Target{Inner: target.NewRefhost(), Rule: rule}
			defer tgt.Close()
			// The sequential host-event model passes too: it makes one
			// call at a time.
			onlyTheModelSees(t, matrixSeed(), reg, corpus, tgt, rule, handWrittenHostEvents+",@req:openwop.model.host-events")
			notLinearizable(t, reg, corpus, tgt, rule, id)
		})
	}
}

// TestModelReplayReproducesTheMinimalSequence replays a failure with the
// seed its row printed and a budget of 1, and gets the same minimal
// sequence back.
func TestModelReplayReproducesTheMinimalSequence(t *testing.T) {
	t.Parallel() // mostly waiting on hosts: the proofs overlap
	if testing.Short() {
		t.Skip("runs the model twice against a sabotaged host")
	}
	reg, corpus := load(t)
	replaysToTheSameSequence(t, reg, corpus, "openwop.model.host-events", "#skips-one", "", 0)
}

// saysHowToReplay: a failing model row carries its minimal sequence, its
// seed and the command that replays exactly it.
func saysHowToReplay(t *testing.T, row *runner.Row, id string) {
	t.Helper()
	for _, want := range []string{"minimal sequence", "seed ", "replay: parley run --tags '@req:" + id + "' --model-seed "} {
		if !strings.Contains(row.Detail, want) {
			t.Errorf("the failing row does not say %q: %s", want, row.Detail)
		}
	}
}

// ruleFor is the sabotage rule key names.
func ruleFor(t *testing.T, key string) sabotage.Rule {
	t.Helper()
	for _, r := range sabotage.Rules() {
		if r.Key() == key {
			return r
		}
	}
	t.Fatalf("no rule %s", key)
	return sabotage.Rule{}
}

// onlyTheModelSees runs the hand-written scenarios tags selects against
// tgt, a host broken by rule, and holds every one to passing (or being
// skipped): the rule is one only the model sees.
func onlyTheModelSees(t *testing.T, ctx context.Context, reg *scenarios.Registry, corpus *scenarios.Corpus, tgt target.Target, rule sabotage.Rule, tags string) {
	t.Helper()
	res, err := runner.Run(ctx, reg, corpus, runner.Options{Target: tgt, Tags: tags})
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range res.Rows {
		if row.Result != verdict.ExecutedPass && row.Result != verdict.Skipped {
			t.Errorf("against a host that %s, the hand-written %s is %s (%s): the rule is meant to be one only the model sees", rule.Broken, row.ID, row.Result, row.Detail)
		}
	}
}

// notLinearizable runs the model id against tgt, a host broken by rule, on
// the matrix's seed, and holds it to failing on a history that is not
// linearizable.
func notLinearizable(t *testing.T, reg *scenarios.Registry, corpus *scenarios.Corpus, tgt target.Target, rule sabotage.Rule, id string) {
	t.Helper()
	res, err := runner.Run(matrixSeed(), reg, corpus, runner.Options{Target: tgt, Tags: "@req:" + id})
	if err != nil {
		t.Fatal(err)
	}
	row := findRow(res.Rows, id)
	if row == nil || row.Result != verdict.ExecutedFail || !strings.Contains(row.Detail, "not linearizable") {
		t.Fatalf("against a host that %s, %s is %v, want executed-fail naming a history that is not linearizable", rule.Broken, id, row)
	}
	t.Logf("%s", row.Detail)
}

func findRow(rows []runner.Row, id string) *runner.Row {
	for i := range rows {
		if rows[i].ID == id {
			return &rows[i]
		}
	}
	return nil
}

func between(s, from, to string) string {
	i := strings.Index(s, from)
	if i < 0 {
		return ""
	}
	s = s[i+len(from):]
	if j := strings.Index(s, to); j >= 0 {
		return s[:j]
	}
	return s
}

// TestModelIdsFailAgainstTheirRules runs every model id's rules and prints
// the failing rows: for iterating on a model (PARLEY_MODEL_RULES=1). The
// matrix test (TestEveryScenarioFailsAgainstSomeSabotagedHost) holds every
// one of these rules to failing its id on every run.
func TestModelIdsFailAgainstTheirRules(t *testing.T) {
	t.Parallel() // mostly waiting on hosts: the proofs overlap
	if os.Getenv("PARLEY_MODEL_RULES") != "1" {
		t.Skip("set PARLEY_MODEL_RULES=1: the matrix test runs these rules already")
	}
	reg, corpus := load(t)
	for _, rule := range sabotage.Rules() {
		if !strings.Contains(rule.ID, ".model.") {
			continue
		}
		t.Run(rule.Key(), func(t *testing.T) {
			tgt := &sabotage.Target{Inner: target.NewRefhost(), Rule: rule}
			defer tgt.Close()
			res, err := runner.Run(matrixSeed(), reg, corpus, runner.Options{Target: tgt, Tags: "@req:" + rule.ID})
			if err != nil {
				t.Fatal(err)
			}
			row := findRow(res.Rows, rule.ID)
			if row == nil || row.Result != verdict.ExecutedFail {
				t.Fatalf("against a host that %s, %s is %v, want executed-fail", rule.Broken, rule.ID, row)
			}
			t.Logf("%s", row.Detail)
		})
	}
}

// handWrittenAGLCore are the hand-written agl-core scenarios: every one but
// the models'. A model may well catch another model's rule (the operations
// model reads permits after their claims, though on the fixed seed not in
// the order stale permit reads show); what these proofs hold to passing is
// the hand-written corpus.
const handWrittenAGLCore = "@profile:agl-core && ~@req:agl.model.permit-claims && ~@req:agl.model.revision-swaps && ~@req:agl.model.operations"

// TestPermitModelCatchesWhatHandWrittenScenariosMiss: against a host whose
// permit reads come from a cache never invalidated, every hand-written
// agl-core scenario passes (each reads a permit at most once after the
// change it checks), and the permit model's history is not linearizable.
func TestPermitModelCatchesWhatHandWrittenScenariosMiss(t *testing.T) {
	t.Parallel() // mostly waiting on hosts: the proofs overlap
	if testing.Short() {
		t.Skip("runs the agl-core scenarios against a sabotaged host")
	}
	reg, corpus := load(t)
	const id = "agl.model.permit-claims"
	rule := ruleFor(t, id+"#stale-reads")
	tgt := &sabotage.Target{Inner: target.NewRefhost(), Rule: rule}
	defer tgt.Close()
	onlyTheModelSees(t, context.Background(), reg, corpus, tgt, rule, handWrittenAGLCore)
	notLinearizable(t, reg, corpus, tgt, rule, id)
}

// TestRevisionModelCatchesWhatHandWrittenScenariosMiss: against a host
// whose edits check the expected revision before their transaction and
// write without a compare-and-swap, every hand-written agl-core scenario
// passes (none races two edits of one revision: the races are proposals
// against proposals and a dispatch against an edit), and the revision
// model's history is not linearizable (two edits expecting one revision
// both answered with the next).
func TestRevisionModelCatchesWhatHandWrittenScenariosMiss(t *testing.T) {
	t.Parallel() // mostly waiting on hosts: the proofs overlap
	if testing.Short() {
		t.Skip("runs the agl-core scenarios against a sabotaged host")
	}
	reg, corpus := load(t)
	const id = "agl.model.revision-swaps"
	rule := ruleFor(t, id+"#lost-edits")
	tgt := &sabotage.Target{Inner: target.NewRefhost(), Rule: rule}
	defer tgt.Close()
	onlyTheModelSees(t, context.Background(), reg, corpus, tgt, rule, handWrittenAGLCore)
	notLinearizable(t, reg, corpus, tgt, rule, id)
}

// handWrittenContractRefine are every ContractRefine scenario but the
// model's: the spec profiles and parley's binding profile (godog's filter
// splits on ',' before '&&', so the exclusion goes with the model's own
// profile, last).
const handWrittenContractRefine = "@profile:contractrefine-tool-binding,@profile:contractrefine-parley-binding,@profile:contractrefine-preflight && ~@req:contractrefine.model.decisions"

// TestDecisionsModelCatchesWhatHandWrittenScenariosMiss runs the decisions
// model's rules that only an order of operations shows: a host whose repair
// budgets reset when a session gets a pass, one that writes a repaired
// plan's pass frame from the repair's record, one that loses the frame of
// a deny decided in a session that already had a pass, and a disabled host
// that still checks the header of tool.echo calls. Against each, every
// hand-written ContractRefine scenario passes (their repair ladders never
// meet a pass in the same session and plan hash, each of their sessions
// sees one kind of outcome, and their disabled calls are tool.deliver
// ones), and the decisions model fails with a minimal sequence. PARLEY_MODEL_ONLY=1 runs only the model half.
func TestDecisionsModelCatchesWhatHandWrittenScenariosMiss(t *testing.T) {
	t.Parallel() // mostly waiting on hosts: the proofs overlap
	if testing.Short() {
		t.Skip("runs the ContractRefine scenarios against sabotaged hosts")
	}
	reg, corpus := load(t)
	modelAloneCatches(t, reg, corpus, "contractrefine.model.decisions", handWrittenContractRefine,
		"budget-reset-by-pass", "repair-frame-kept", "deny-after-pass-lost", "disabled-checks-echo")
}

// handWrittenAGTP are the hand-written AGTP RCNS scenarios: every one but
// the models'.
const handWrittenAGTP = "@profile:agtp-rcns && ~@req:agtp.model.contracts && ~@req:agtp.model.idempotent-retries"

// TestContractsModelCatchesWhatHandWrittenScenariosMiss runs the contracts
// model's rules: against each, every hand-written agtp-rcns scenario passes
// (none revokes one contract of an agent holding another and presents that
// other again, none obtains a contract after a release and compares its id
// with the released one). (The matrix holds the model id to failing under
// each; the replay proof checks what a failing row says.)
func TestContractsModelCatchesWhatHandWrittenScenariosMiss(t *testing.T) {
	t.Parallel() // mostly waiting on hosts: the proofs overlap
	if testing.Short() {
		t.Skip("runs the agtp-rcns scenarios twice against sabotaged hosts")
	}
	reg, corpus := load(t)
	const id = "agtp.model.contracts"
	for _, variant := range []string{"revoke-takes-all", "released-id-reissued"} {
		t.Run(variant, func(t *testing.T) {
			rule := ruleFor(t, id+"#"+variant)
			tgt := &sabotage.Target{Inner: target.NewRefhost(), Rule: rule}
			defer tgt.Close()
			onlyTheModelSees(t, context.Background(), reg, corpus, tgt, rule, handWrittenAGTP)
		})
	}
}

// TestContractsModelReplayReproducesTheMinimalSequence: a failure of the
// contracts model replays from the seed its row printed, with a budget of
// 1, to the same minimal sequence (contracts are named by their place in
// the sequence, never by the host's ids, so the same draws read the same).
func TestContractsModelReplayReproducesTheMinimalSequence(t *testing.T) {
	t.Parallel() // mostly waiting on hosts: the proofs overlap
	if testing.Short() {
		t.Skip("runs the contracts model twice against a sabotaged host")
	}
	reg, corpus := load(t)
	// One row: the seed a row prints is that row's.
	replaysToTheSameSequence(t, reg, corpus, "agtp.model.contracts", "#released-id-reissued", " && @fixture:agtp-model", 60)
}

// matrixSeed is the context the model-id runs of these proofs take: the
// seed docs/sabotage.md was generated with, so that a proof sees what the
// matrix saw rather than depending on a fresh seed's luck (a rule a model
// catches on most seeds, not all).
func matrixSeed() context.Context {
	return models.WithSettings(context.Background(), models.Settings{Seed: sabotagetest.MatrixModelSeed})
}

// unshrunk is the matrix's seed with shrinking cut to nothing: a proof
// that needs only the failing row and what it says (a sequence, the seed,
// the replay command) does not wait for rapid to minimize it; the replay
// proofs hold shrinking to its result.
func unshrunk() context.Context {
	return models.WithSettings(context.Background(), models.Settings{Seed: sabotagetest.MatrixModelSeed, ShrinkTime: time.Millisecond})
}

// unhurried bounds shrinking in the contracts replay proof far beyond what
// it takes (seconds): rapid stops shrinking at a time limit, and two minimal
// sequences compare equal only if neither was cut short by a busy machine.
// The host-event model's replay proof takes it too: its sequences learn that
// a record will not come from a barrier record the host delivers in its
// place, never from a wait, so each step of its shrinking is fast.
const unhurried = 5 * time.Minute

// TestIdempotencyModelCatchesWhatHandWrittenScenariosMiss: against a host
// whose idempotency cache is kept per connection, every hand-written
// agtp-rcns scenario passes (each replays a key on its one connection),
// and the idempotency model's history is not linearizable (the same key
// on another connection executed again). PARLEY_MODEL_ONLY=1 runs only
// the model half.
func TestIdempotencyModelCatchesWhatHandWrittenScenariosMiss(t *testing.T) {
	t.Parallel() // mostly waiting on hosts: the proofs overlap
	if testing.Short() {
		t.Skip("runs the agtp-rcns scenarios against a sabotaged host")
	}
	reg, corpus := load(t)
	const id = "agtp.model.idempotent-retries"
	rule := ruleFor(t, id+"#cache-per-connection")
	tgt := &sabotage.Target{Inner: target.NewRefhost(), Rule: rule}
	defer tgt.Close()
	if os.Getenv("PARLEY_MODEL_ONLY") != "1" {
		onlyTheModelSees(t, context.Background(), reg, corpus, tgt, rule, handWrittenAGTP)
	}
	notLinearizable(t, reg, corpus, tgt, rule, id)
}

// TestOperationsModelCatchesWhatHandWrittenScenariosMiss runs the
// operations model's rules: against each, every hand-written agl-core
// scenario passes (none presents a permit again after a human recorded its
// Unknown operation as without effect, none meets a spent budget after a
// consumed permit was refused in the same execution), and the model fails
// with a minimal sequence.
func TestOperationsModelCatchesWhatHandWrittenScenariosMiss(t *testing.T) {
	t.Parallel() // mostly waiting on hosts: the proofs overlap
	if testing.Short() {
		t.Skip("runs the agl-core scenarios twice against sabotaged hosts")
	}
	reg, corpus := load(t)
	modelAloneCatches(t, reg, corpus, "agl.model.operations", handWrittenAGLCore, "no-effect-frees-permit", "denial-refunds-budget")
}

// TestOperationsModelReplayReproducesTheMinimalSequence: a failure of the
// operations model replays from the seed its row printed, with a budget of
// 1, to the same minimal sequence (actions are named by their place in the
// sequence, never by the host's ids). Unhurried shrinking of its
// sequences takes minutes (about a hundred and fifty seconds for the pair
// on an idle two-core machine), so it runs with PARLEY_MODEL_RULES=1.
func TestOperationsModelReplayReproducesTheMinimalSequence(t *testing.T) {
	t.Parallel() // mostly waiting on hosts: the proofs overlap
	if testing.Short() || os.Getenv("PARLEY_MODEL_RULES") != "1" {
		t.Skip("set PARLEY_MODEL_RULES=1: shrinks the operations model twice, unhurried, against a sabotaged host")
	}
	reg, corpus := load(t)
	replaysToTheSameSequence(t, reg, corpus, "agl.model.operations", "#denial-refunds-budget", "", 0)
}

// replaysToTheSameSequence runs model id (restricted by and, a tag
// expression's tail, to one row: a row prints its own seed) against a host
// broken by the id's rule variant, shrinking unhurried, then replays the
// seed the failing row printed with a budget of 1: the replay must shrink
// to the same minimal sequence. budget 0 is the default.
func replaysToTheSameSequence(t *testing.T, reg *scenarios.Registry, corpus *scenarios.Corpus, id, variant, and string, budget int) {
	t.Helper()
	rule := ruleFor(t, id+variant)
	run := func(s models.Settings) *runner.Row {
		tgt := &sabotage.Target{Inner: target.NewRefhost(), Rule: rule}
		defer tgt.Close()
		res, err := runner.Run(models.WithSettings(context.Background(), s), reg, corpus, runner.Options{Target: tgt, Tags: "@req:" + id + and})
		if err != nil {
			t.Fatal(err)
		}
		r := findRow(res.Rows, id)
		if r == nil || r.Result != verdict.ExecutedFail {
			t.Fatalf("against a host that %s, %s is %v, want executed-fail", rule.Broken, id, r)
		}
		return r
	}
	first := run(models.Settings{Seed: 20261202, Budget: budget, ShrinkTime: unhurried})
	saysHowToReplay(t, first, id)
	seed := between(first.Detail, "--model-seed ", " ")
	n, err := strconv.ParseUint(seed, 10, 64)
	if err != nil {
		t.Fatalf("no seed in the replay command: %s", first.Detail)
	}
	again := run(models.Settings{Seed: n, Budget: 1, ShrinkTime: unhurried})
	t.Logf("%s\nreplay: %s", first.Detail, between(again.Detail, "seed ", "\n"))
	if a, b := between(first.Detail, "minimal sequence", "seed "), between(again.Detail, "minimal sequence", "seed "); a != b {
		t.Errorf("the replay shrank to another sequence:\nfirst:\n%s\nreplay:\n%s", a, b)
	}
}

// modelAloneCatches runs, for each rule variant of model id, the
// hand-written scenarios tags selects against a host broken by it (all must
// pass, unless PARLEY_MODEL_ONLY=1), then the model id, which must fail with
// a row that says how to replay it (read unshrunk: the replay proofs hold
// shrinking).
func modelAloneCatches(t *testing.T, reg *scenarios.Registry, corpus *scenarios.Corpus, id, handWritten string, variants ...string) {
	t.Helper()
	for _, variant := range variants {
		t.Run(variant, func(t *testing.T) {
			t.Parallel()
			rule := ruleFor(t, id+"#"+variant)
			tgt := &sabotage.Target{Inner: target.NewRefhost(), Rule: rule}
			defer tgt.Close()
			if os.Getenv("PARLEY_MODEL_ONLY") != "1" {
				onlyTheModelSees(t, context.Background(), reg, corpus, tgt, rule, handWritten)
			}
			res, err := runner.Run(unshrunk(), reg, corpus, runner.Options{Target: tgt, Tags: "@req:" + id})
			if err != nil {
				t.Fatal(err)
			}
			row := findRow(res.Rows, id)
			if row == nil || row.Result != verdict.ExecutedFail {
				t.Fatalf("against a host that %s, %s is %v, want executed-fail", rule.Broken, id, row)
			}
			saysHowToReplay(t, row, id)
			t.Logf("%s", row.Detail)
		})
	}
}
