package sabotage

// AGL rule for a restart of the same host under a changed deployment
// (spec 6.3, 8; issue 24 rule 4): features/agl/8_durability_and_uncertain_outcomes.feature.

func init() { aglRules = append(aglRules, aglRestartRules...) }

var aglRestartRules = []Rule{
	{
		ID:     "agl.recovery.deployment-changed-at-restart",
		Broken: "resends an interrupted deduplicated send on recovery under whatever deployment the restarted host runs: a policy or destination changed at the restart does not stop the resend",
		// The host the restart gave stops recovery; the broken one sends
		// the claimed operation again under its key and settles it.
		Response: aglResumeUnchecked,
	},
}
