#!/usr/bin/env bash
# Slurm HealthCheckProgram wrapper (slurm.conf: HealthCheckProgram=/usr/local/sbin/nightowl-healthcheck.sh,
# HealthCheckInterval=3600). Runs nightowl's node-health on this node only, then:
#   - the verdict's action needs the node out of service: drain it, reason "nightowl: VERDICT (ACTION)";
#   - the node looks healthy again and nightowl drained it: it returns only through `nightowl verify` against
#     the incident bundle its drain cites (the actions log's drain line), the same gate as a person's verify:
#     a pass resumes it (the reason naming both bundles), a failed verify keeps it out and counts toward the
#     node's cap. "nightowl drained it" means the reason is exactly one this script writes ("nightowl:
#     VERDICT (ACTION)"); a reason a person annotated ("nightowl: gpu-fell-off-bus (reboot-node), RMA open")
#     is theirs now, and stays; a drain the node's cap made for a hardware ticket waits for a person;
#   - anything else (informational verdict, nightowl could not judge or failed, a node drained by someone
#     else): leave the node as it is. A health check must never drain a fleet because of its own bug,
#     nor undo a person's drain.
# Always exits 0: when slurmd starts, it re-runs a failing HealthCheckProgram until it exits 0 before
# registering (slurm.conf(5), HealthCheckProgram: https://slurm.schedmd.com/slurm.conf.html).
#
# slurmd kills a HealthCheckProgram after 60 s and runs it with an EMPTY environment (only
# SLURMD_NODENAME): this script sets its own PATH, finds slurm.conf, and gives nightowl a deadline
# well inside that minute. Settings (environment): NIGHTOWL (the command), NIGHTOWL_OUT (bundles),
# NIGHTOWL_TEXTFILE (node-exporter textfile), NIGHTOWL_HOST_TIMEOUT (seconds, default 40),
# NIGHTOWL_HEALTHCHECK_LOG (where nightowl's stderr goes, default /dev/null),
# NIGHTOWL_HEALTHCHECK_LOCK (default /run/lock/nightowl-healthcheck.lock).
#
# Drains and resumes go through `nightowl slurm drain|resume`, which log every action taken or held to a
# hash-chained actions.jsonl (NIGHTOWL_ACTIONS_LOG, default next to the bundles' folder) and, when caps
# are set, hold a drain once the fleet circuit breaker is open: NIGHTOWL_MAX_DRAIN (nodes),
# NIGHTOWL_MAX_DRAIN_PERCENT (of the cluster's nodes), NIGHTOWL_DRAIN_WINDOW (default 1h), counted in
# Slurm's own state (nodes drained with the `nightowl:` reason), so checks on different nodes share one
# bound. NIGHTOWL_DRAIN_LOCK: a lock file shared by the nodes' checks (a shared file system) serialises
# their decisions; without it, drains made at the same moment still settle on the cap.
# NIGHTOWL_MAX_NODE_ACTIONS: the node's cap (docs/reference.md#node-cap): after that many drains (or failed
# verifies) of this node for one fault family in NIGHTOWL_NODE_ACTIONS_WINDOW (default 7d), counted in the
# actions log, the next drain is for a hardware ticket and no verify resumes it. Put NIGHTOWL_ACTIONS_LOG on
# shared storage for a count that outlives the node's state dir.
set -u
export PATH="${PATH:+$PATH:}/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
if [ -z "${SLURM_CONF:-}" ]; then
  # /etc/slurm (Slurm's default), /etc/slurm-llnl (Debian before 11), /run/slurm/conf (configless mode:
  # slurmd's cached copy, https://slurm.schedmd.com/configless_slurm.html)
  for conf in /etc/slurm/slurm.conf /etc/slurm-llnl/slurm.conf /run/slurm/conf/slurm.conf; do
    if [ -r "$conf" ]; then export SLURM_CONF="$conf"; break; fi
  done
fi

NIGHTOWL=${NIGHTOWL:-nightowl}
OUT=${NIGHTOWL_OUT:-/var/lib/nightowl/bundles}
TEXTFILE=${NIGHTOWL_TEXTFILE:-/var/lib/node_exporter/textfile_collector/nightowl.prom}
HOST_TIMEOUT=${NIGHTOWL_HOST_TIMEOUT:-40}
LOG=${NIGHTOWL_HEALTHCHECK_LOG:-/dev/null}
NODE=${SLURMD_NODENAME:-$(hostname -s)}
export NODE_NAME="$NODE"   # nightowl names the node (textfile, bundle) after Slurm's node name
DRAIN_ACTIONS=" reboot-node drain-and-reset reset-gpu hardware-ticket "
PREFIX="nightowl:"
ACTIONS_LOG=${NIGHTOWL_ACTIONS_LOG:-${OUT%/*}/actions.jsonl}
breaker=(--actions-log "$ACTIONS_LOG" --window "${NIGHTOWL_DRAIN_WINDOW:-1h}")
[ -n "${NIGHTOWL_MAX_DRAIN:-}" ] && breaker+=(--max-drain "$NIGHTOWL_MAX_DRAIN")
[ -n "${NIGHTOWL_MAX_DRAIN_PERCENT:-}" ] && breaker+=(--max-drain-percent "$NIGHTOWL_MAX_DRAIN_PERCENT")
[ -n "${NIGHTOWL_DRAIN_LOCK:-}" ] && breaker+=(--lock "$NIGHTOWL_DRAIN_LOCK")
node_cap=(--node-actions-window "${NIGHTOWL_NODE_ACTIONS_WINDOW:-7d}")
[ -n "${NIGHTOWL_MAX_NODE_ACTIONS:-}" ] && node_cap+=(--max-node-actions "$NIGHTOWL_MAX_NODE_ACTIONS")

# One check at a time: slurmd starts the program every HealthCheckInterval whether or not the last run
# ended, and two runs racing on drain/resume could undo each other. A run that finds one in flight
# leaves it to that one.
LOCK=${NIGHTOWL_HEALTHCHECK_LOCK:-/run/lock/nightowl-healthcheck.lock}
if command -v flock >/dev/null 2>&1; then
  exec 9>>"$LOCK" && flock -n 9 || exit 0
fi

# True when REASON is exactly what this script writes when it drains: "nightowl: VERDICT (ACTION)" with a
# verdict id and one of the drain actions, nothing before or after.
own_reason() {
  local pattern='^nightowl: [a-z0-9][a-z0-9-]* \((reboot-node|drain-and-reset|reset-gpu|hardware-ticket)\)$'
  [[ "$1" =~ $pattern ]]
}

# True when REASON is a drain the node's cap made for a hardware ticket ("... (hardware-ticket) N times in W,
# node cap M"): it waits for a person (`nightowl slurm resume` after the repair).
ticket_reason() {
  local pattern='^nightowl: [a-z0-9][a-z0-9._-]* \(hardware-ticket\) [0-9]+ times in [0-9a-z]+, node cap [0-9]+$'
  [[ "$1" =~ $pattern ]]
}

# The bundle that nightowl's drain with REASON cites: its last drain line in the actions log (else nothing).
incident_bundle() {
  python3 - "$ACTIONS_LOG" "$NODE" "$1" 2>>"$LOG" <<'PY'
import json, sys
log, node, reason = sys.argv[1:]
bundle = ""
try:
    lines = open(log, encoding="utf-8", errors="replace").read().splitlines()
except OSError:
    lines = []
for text in lines:
    try:
        line = json.loads(text)
    except ValueError:
        continue
    drained = isinstance(line, dict) and line.get("what") == "drain" and line.get("node") == node
    if drained and line.get("result") in ("drained", "drained-unconfirmed"):
        if str(line.get("why") or "").split(";")[0] == reason:
            bundle = line.get("bundle") or ""
print(bundle)
PY
}

# Resume this node only through `nightowl verify` against the incident its drain (REASON) cites, with what is
# left of slurmd's minute after the check (SECONDS: bash's own clock since the script began).
verify_and_resume() {
  local incident left verify_timeout
  incident=$(incident_bundle "$1")
  left=$((55 - SECONDS))
  verify_timeout=$((left - 10))
  [ "$verify_timeout" -gt "$HOST_TIMEOUT" ] && verify_timeout=$HOST_TIMEOUT
  if [ -z "$incident" ] || [ ! -d "$incident" ]; then
    echo "nightowl-healthcheck: $NODE: no incident bundle for nightowl's drain ($1) in $ACTIONS_LOG;" \
      "left drained (nightowl verify $NODE --incident BUNDLE --resume slurm returns it)" >>"$LOG"
  elif [ "$verify_timeout" -lt 5 ]; then
    echo "nightowl-healthcheck: $NODE: no time left to verify in this check; the next one will" >>"$LOG"
  else
    timeout -k 5 "$((verify_timeout + 5))" "$NIGHTOWL" verify "$NODE" --incident "$incident" --local \
      --resume slurm --actions-log "$ACTIONS_LOG" --out "$OUT" --host-timeout "$verify_timeout" \
      "${node_cap[@]}" >>"$LOG" 2>&1
  fi
}

# The drain reason of this node when it is drained or draining, else nothing.
drain_reason() {
  local state reason
  IFS='|' read -r state reason < <(sinfo -h -N -n "$NODE" -o '%T|%E' 2>>"$LOG")
  case "${state:-}" in
    *drain*) printf '%s' "${reason:-}" ;;
  esac
}

# nightowl's own deadline plus 10 s of grace before `timeout` stops it: 50 s < slurmd's 60 s.
result=$(timeout -k 5 "$((HOST_TIMEOUT + 10))" "$NIGHTOWL" check --format json --host-timeout "$HOST_TIMEOUT" \
  --out "$OUT" --textfile "$TEXTFILE" 2>>"$LOG")
status=$?
current=$(drain_reason)

case "$status" in
  0)  # healthy: nightowl's own drain (the exact reason it wrote) returns through verify; never anyone else's
    if own_reason "$current"; then
      verify_and_resume "$current"
    elif ticket_reason "$current"; then
      echo "nightowl-healthcheck: $NODE held for a hardware ticket ($current); not resumed" >>"$LOG"
    fi
    ;;
  1)  # needs action: drain when the action takes the node out of service
    read -r verdict action bundle < <(printf '%s' "$result" | python3 -c '
import json, sys
report = json.load(sys.stdin)
v = report["hosts"][0].get("verdict") or {}
print(v.get("id", "unknown"), v.get("action", "none"), report.get("bundle") or "")')
    reason="$PREFIX ${verdict:-unknown} (${action:-none})"
    case "$DRAIN_ACTIONS" in
      *" ${action:-none} "*)
        if ticket_reason "$current"; then
          echo "nightowl-healthcheck: $NODE held for a hardware ticket ($current); left as it is" >>"$LOG"
        elif [ -n "$current" ] && ! own_reason "$current"; then
          echo "nightowl-healthcheck: $NODE already drained by someone else ($current); not touching it" >>"$LOG"
        elif [ "$current" != "$reason" ]; then
          "$NIGHTOWL" slurm drain "$NODE" --verdict "${verdict:-unknown}" --action "${action:-none}" \
            ${bundle:+--bundle "$bundle"} "${breaker[@]}" "${node_cap[@]}" >>"$LOG" 2>&1
        fi
        ;;
    esac
    ;;
  *)  # 2/3/124/137/130/143: nightowl could not judge; a drain stays, nothing new is drained
    ;;
esac
exit 0
