#!/bin/sh
# node-problem-detector custom plugin (deploy/kubernetes/nightowl-npd-monitor.json): runs nightowl's
# node-health on this node and answers in NPD's protocol: exit 0 OK, 1 NonOK (NightowlGPUProblem turns
# True), 2 Unknown (could not judge); stdout, at most the monitor's max_output_length bytes, is the
# condition message `VERDICT [BUNDLE] summary`. NPD kills a plugin at the rule's timeout (55s there):
# nightowl gets NIGHTOWL_HOST_TIMEOUT (default 40) plus 10 s of grace.
# Settings (environment): NIGHTOWL, NIGHTOWL_OUT, NIGHTOWL_HOST_TIMEOUT, NIGHTOWL_NPD_MAX_OUTPUT_LENGTH
# (must equal the monitor's max_output_length, default 80).
NIGHTOWL=${NIGHTOWL:-nightowl}
OUT=${NIGHTOWL_OUT:-/var/lib/nightowl/bundles}
HOST_TIMEOUT=${NIGHTOWL_HOST_TIMEOUT:-40}
report=$(timeout -k 3 "$((HOST_TIMEOUT + 10))" "$NIGHTOWL" check --format json --host-timeout "$HOST_TIMEOUT" \
  --out "$OUT" 2>/dev/null)
status=$?
printf '%s' "$report" | exec "$NIGHTOWL" npd-result --check-status "$status" \
  --max-output-length "${NIGHTOWL_NPD_MAX_OUTPUT_LENGTH:-80}"
