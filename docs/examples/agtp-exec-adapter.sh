#!/bin/sh
# Example exec adapter for an AGTP host configured by a TOML file
# (docs/hosts/agtp.md; docs/host-interface.md, "The exec adapter contract").
#
#   parley run --target exec --exec "sh docs/examples/agtp-exec-adapter.sh" --tags @profile:agtp-rcns
#
# parley runs it with the path of a configuration document. The adapter
# translates the document's spec-level "agtp" section (schemas/agtp/
# host-config.json: RCNS knobs, agents, capabilities, endpoints, recipes,
# passthroughs, PROPOSE policy) into the host's own TOML dialect, writes the
# TLS material to files, starts the host (its binary: $AGTP_HOST, default
# agtp-toml-host from docs/examples), and lets the host print the ready line.
# $AGTP_BODY_FORM (envelope, the default, or flat) is the request body form
# the host declares in that line. parley stops it with SIGTERM to the
# process group. A configuration the host cannot take is declined with one
# line on stdout and exit status 0: the scenarios that need it are then
# blocked with the reason, not failed. Needs jq.
#
# parley starts one host per AGTP fixture (docs/hosts/agtp.md, "Fixtures")
# and one more for each scenario that changes host-wide state. A fixture
# that asks for test seams ("seams": true) is served all the same: this
# host has none, so the few scenarios that read a seam are blocked
# (seam-absent) and the rest run. A fixture's plaintext_listener asks for a
# second, plaintext listener on loopback beside the TLS one; with
# $AGTP_PLAINTEXT=off the host declares that member unsupported instead,
# and the plaintext scenarios are blocked naming it.
set -eu
cfg="$1"
host="${AGTP_HOST:-agtp-toml-host}"

decline() {
	jq -cn --arg reason "$1" '{parley: "declined", reason: $reason}'
	exit 0
}
if ! jq -e '.agtp' "$cfg" >/dev/null; then
	decline "the configuration has no agtp section"
fi
# The host's primitive kinds cover these capability effects; another effect
# is a configuration it cannot take.
unknown=$(jq -r '[.agtp.capabilities // [] | .[].effect | select(IN("store", "fetch", "list", "count", "echo") | not)] | unique | join(", ")' "$cfg")
if [ -n "$unknown" ]; then
	decline "this host has no primitive for the capability effects: $unknown"
fi

dir=$(mktemp -d "${TMPDIR:-/tmp}/parley-agtp.XXXXXX")
# The section in the host's dialect: [policies.rcns] and [policies.propose]
# take the knobs as they are; recipes compose "steps"; capabilities become
# [[primitives]] of the host's kinds, bound to their records as collections;
# endpoints and passthroughs name the primitive that serves them. Every
# value is written with tojson, which is also a valid TOML scalar or array.
jq -r '
def kv: to_entries[] | select(.value != null) | "\(.key) = \(.value | tojson)";
def kinds: {store: "record.put", fetch: "record.get", list: "record.list", count: "counter.incr", echo: "echo"};
.agtp as $a
| ($a.server_id // empty | "server_id = \(tojson)"),
  "", "[policies]", ($a.methods // empty | "methods = \(tojson)"),
  "", "[policies.rcns]", (($a.rcns // {}) | kv),
  "", "[policies.propose]", (($a.propose // {}) | kv),
  (($a.recipes // [])[] | "", "[[policies.recipes]]",
    ({name, version, method, path, steps: .composed_of, success_status} | kv)),
  (($a.passthroughs // [])[] | "", "[[policies.passthroughs]]",
    ({method, path, primitive: .capability, success_status} | kv)),
  (($a.agents // [])[] | "", "[[agents]]", kv),
  (($a.capabilities // [])[] | "", "[[primitives]]",
    ({name, kind: kinds[.effect], collection: .records, key_param: .key, scopes: .authority_scope} | kv)),
  (($a.endpoints // [])[] | "", "[[endpoints]]",
    ({method, path, tier, primitive: .capability, success_status} | kv))
' "$cfg" >"$dir/host.toml"
# A scenario that restarts its host names a state_dir: the host keeps its
# durable state there, so that the host started again finds it.
data=$(jq -r '.state_dir // empty' "$cfg")
set -- -config "$dir/host.toml" -data "${data:-$dir/data}" -body-form "${AGTP_BODY_FORM:-envelope}"
if [ "$(jq -r '.agtp.tls != null' "$cfg")" = "true" ]; then
	jq -r '.agtp.tls.cert_pem' "$cfg" >"$dir/cert.pem"
	(umask 077 && jq -r '.agtp.tls.key_pem' "$cfg" >"$dir/key.pem")
	set -- "$@" -cert "$dir/cert.pem" -key "$dir/key.pem"
	if [ "$(jq -r '.agtp.plaintext_listener // false' "$cfg")" = "true" ]; then
		if [ "${AGTP_PLAINTEXT:-on}" = "off" ]; then
			set -- "$@" -unsupported plaintext-listener
		else
			set -- "$@" -plaintext-listen 127.0.0.1:0
		fi
	fi
fi

"$host" "$@" &
pid=$!
trap 'kill -TERM "$pid" 2>/dev/null; wait "$pid"; rm -rf "$dir"; exit 0' TERM INT
status=0
wait "$pid" || status=$?
rm -rf "$dir"
exit "$status"
