#!/usr/bin/env bash
# Slurm HealthCheckProgram wrapper (slurm.conf: HealthCheckProgram=/usr/local/sbin/nightowl-healthcheck.sh,
# HealthCheckInterval=3600). Runs nightowl's node-health on this node only and drains the node, with the
# verdict as the reason, only when the verdict's action needs the node out of service. Anything else
# (healthy, informational, nightowl itself failing) leaves the node as it is: a health check must never
# drain a fleet because of its own bug.
set -u
NIGHTOWL=${NIGHTOWL:-nightowl}
OUT=${NIGHTOWL_OUT:-/var/lib/nightowl/bundles}
TEXTFILE=${NIGHTOWL_TEXTFILE:-/var/lib/node_exporter/textfile_collector/nightowl.prom}
NODE=${SLURMD_NODENAME:-$(hostname -s)}
DRAIN_ACTIONS=" reboot-node drain-and-reset reset-gpu hardware-ticket "

result=$(timeout 300 "$NIGHTOWL" check --format json --out "$OUT" --textfile "$TEXTFILE" 2>/dev/null)
status=$?
[ "$status" -eq 1 ] || exit 0   # 0: healthy; 2/3/124/130: nightowl could not judge: do not drain

read -r verdict action < <(printf '%s' "$result" | python3 -c '
import json, sys
host = json.load(sys.stdin)["hosts"][0]
v = host.get("verdict") or {}
print(v.get("id", "unknown"), v.get("action", "none"))')

case "$DRAIN_ACTIONS" in
  *" $action "*)
    scontrol update NodeName="$NODE" State=DRAIN Reason="nightowl: $verdict ($action)"
    ;;
esac
exit 0
