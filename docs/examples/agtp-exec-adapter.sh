#!/bin/sh
# Example exec adapter for an AGTP host configured by a TOML file
# (docs/host-interface.md, "AGTP hosts (exec target)").
#
#   parley run --target exec --exec "sh docs/examples/agtp-exec-adapter.sh" --tags @profile:agtp-rcns
#
# parley runs it with the path of a configuration document. The adapter
# writes the host's TOML and TLS material to files, starts the host (its
# binary: $AGTP_HOST, default agtp-toml-host from docs/examples), and lets the
# host print the ready line. parley stops it with SIGTERM to the process
# group. A configuration the host cannot take is declined with one line on
# stdout and exit status 0: the scenarios that need it are then blocked with
# the reason, not failed. Needs jq.
set -eu
cfg="$1"
host="${AGTP_HOST:-agtp-toml-host}"

decline() {
	jq -cn --arg reason "$1" '{parley: "declined", reason: $reason}'
	exit 0
}
if [ "$(jq -r '.seams // false' "$cfg")" = "true" ]; then
	decline "this host has no test seams"
fi
if ! jq -e '.agtp.toml' "$cfg" >/dev/null; then
	decline "the configuration has no agtp section"
fi

dir=$(mktemp -d "${TMPDIR:-/tmp}/parley-agtp.XXXXXX")
jq -r '.agtp.toml' "$cfg" >"$dir/host.toml"
set -- -config "$dir/host.toml" -data "$dir/data"
if [ "$(jq -r '.agtp.tls != null' "$cfg")" = "true" ]; then
	jq -r '.agtp.tls.cert_pem' "$cfg" >"$dir/cert.pem"
	(umask 077 && jq -r '.agtp.tls.key_pem' "$cfg" >"$dir/key.pem")
	set -- "$@" -cert "$dir/cert.pem" -key "$dir/key.pem"
fi

"$host" "$@" &
pid=$!
trap 'kill -TERM "$pid" 2>/dev/null; wait "$pid"; rm -rf "$dir"; exit 0' TERM INT
status=0
wait "$pid" || status=$?
rm -rf "$dir"
exit "$status"
