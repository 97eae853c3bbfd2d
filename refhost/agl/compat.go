package agl

import (
	"encoding/json"
	"reflect"
	"sort"
	"strings"
)

// Module-interface compatibility (spec section 10). A contract's exported
// interface is its authority requirements, protocol (input states and
// outcome states), effects, approval requirement, idempotency contract and
// the implementation behind it. Adding authority or effects, strengthening
// or changing states, or changing approval bindings is an exported
// compatibility change: the host registers such a change only under a new
// major version. Anything else (fewer effects, a scheduling change, a new
// output member) is compatible and may take a new minor version; either way
// the new version has a new contract fingerprint, so permits issued under
// the old one stop (section 4.2, 6.3).

// majorVersion is the part of a contract version before its first dot:
// "2" for "2", "2.1" and "2.1.3".
func majorVersion(v string) string {
	major, _, _ := strings.Cut(v, ".")
	return major
}

// interfaceChanges lists the exported-interface changes from old to c.
func interfaceChanges(old, c *OperationContract) []string {
	var out []string
	for _, e := range c.PossibleEffects {
		if !contains(old.PossibleEffects, e) {
			out = append(out, "adds effect "+e)
		}
	}
	oldAuth, newAuth := authoritySet(old), authoritySet(c)
	for _, a := range newAuth {
		if !contains(oldAuth, a) {
			out = append(out, "adds authority requirement "+a)
		}
	}
	for _, a := range oldAuth {
		if !contains(newAuth, a) {
			out = append(out, "drops authority requirement "+a+" (weaker authority)")
		}
	}
	if !reflect.DeepEqual(preconditionSet(old), preconditionSet(c)) {
		out = append(out, "changes protocol preconditions")
	}
	if !reflect.DeepEqual(old.ProtocolOutcomes, c.ProtocolOutcomes) {
		out = append(out, "changes protocol outcome states")
	}
	if old.ApprovalRequirement != c.ApprovalRequirement {
		out = append(out, "changes the approval requirement")
	}
	if old.IdempotencyContract != c.IdempotencyContract {
		out = append(out, "changes the idempotency contract")
	}
	if old.Implementation != c.Implementation {
		out = append(out, "changes the implementation")
	}
	if !reflect.DeepEqual(canonicalType(old.InputType), canonicalType(c.InputType)) {
		out = append(out, "changes the input type approvals bind")
	}
	return out
}

func authoritySet(c *OperationContract) []string {
	var out []string
	for _, a := range c.AuthorityRequirements {
		out = append(out, a.Kind+" at "+a.Select)
	}
	sort.Strings(out)
	return out
}

func preconditionSet(c *OperationContract) []string {
	var out []string
	for _, p := range c.ProtocolPreconditions {
		out = append(out, p.Argument+" in "+p.State)
	}
	sort.Strings(out)
	return out
}

func canonicalType(t *TypeSpec) string {
	b, _ := json.Marshal(t)
	return string(b)
}

// checkCompatibility refuses a new version of a registered contract whose
// interface change is incompatible unless it is a new major version.
func checkCompatibility(oldVersion, oldDoc string, c *OperationContract) *Denial {
	if majorVersion(oldVersion) != majorVersion(c.ContractVersion) {
		return nil
	}
	var old OperationContract
	if err := json.Unmarshal([]byte(oldDoc), &old); err != nil {
		return nil
	}
	changes := interfaceChanges(&old, c)
	if len(changes) == 0 {
		return nil
	}
	d := deny(409, "incompatible_contract_change", "proposal_mismatch", 0,
		"%s %s %s; an incompatible interface change needs a new major version (registered: %s)",
		c.QualifiedName, c.ContractVersion, strings.Join(changes, ", "), oldVersion)
	d.Detail = map[string]any{"registered_version": oldVersion, "changes": changes}
	return d
}
