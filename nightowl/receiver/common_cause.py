"""A storm's common cause: when most hosts of one failure domain share a fault, the domain comes first.

Eight nodes of one rack whose GPUs all fell off the bus within five seconds are not eight GPUs to reboot:
rack power, a PDU, a PCIe switch or an NVSwitch tray failed under them, and rebooting them one by one
hides it. The storm capture's hosts are grouped by the failure domains their alerts' labels name
(``rack``, ``switch``, the storm's own label, ``nvlink_domain``, ``clique``, ``pdu``) and by what their
facts show (the NVLink fabric's ClusterUUID), and judged by the sweep's rule (nightowl/fleet/domains.py:
at least 3 members and at least half of those judged share a verdict that needs action). Each such domain
is a finding whose action is to inspect the domain before acting on its nodes; it goes first in the
capture's outcome, its note and its draft. Pure functions over the runs, plus one callback that keeps the
bundle's storm record current while the hosts finish (so the draft, written with the bundle, has it).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from typing import Any

# Labels an alert may carry that name a failure domain (beyond fleet/domains.py's rack and switch).
DOMAIN_LABELS = ("nvlink_domain", "clique", "pdu")


def memberships(labels_by_host: Iterable[tuple[str, Mapping[str, str]]], by: str) -> dict[str, dict[str, str]]:
    """Each host's ``{kind: name}`` from its alerts' labels; the storm's own label (``by``) always counts."""
    from nightowl.fleet.domains import domain_keys

    listed = [*([by] if by != "rule" else []), *DOMAIN_LABELS]
    found: dict[str, dict[str, str]] = {}
    for host, labels in labels_by_host:
        for kind, name in domain_keys(labels, listed).items():
            found.setdefault(host, {}).setdefault(kind, name)
    return found


def common_causes(
    runs: list[Any], labelled: Mapping[str, Mapping[str, str]], alerts_by_host: Mapping[str, int] | None = None
) -> list[dict[str, Any]]:
    """The storm's domain findings, the most widely shared first: ``{kind, name, suspect, verdict, host_action,
    shared_by, of, members, primary, line}``. ``runs`` are the hosts' runs (any order), ``labelled`` the
    memberships the alerts named (:func:`memberships`)."""
    from nightowl.fleet.domains import DOMAIN_SUSPECTS, fleet_domains, with_fact_domains
    from nightowl.fleet.outliers import fleet_facts

    facts = fleet_facts(runs)
    hosts = [{"host": r.host, "status": r.status, "verdict": r.verdict} for r in runs]
    domains = fleet_domains(hosts, with_fact_domains(labelled, facts), facts["xid_events"])
    found = []
    for domain in domains:
        for finding in domain["findings"]:
            entry = {
                "kind": domain["kind"],
                "name": domain["name"],
                "suspect": DOMAIN_SUSPECTS.get(str(domain["kind"]), str(domain["kind"])),  # what in it to check
                "verdict": finding["verdict"],
                "host_action": finding["host_action"],
                "shared_by": finding["shared_by"],
                "of": finding["of"],
                "members": finding["members"],
                "primary": domain.get("primary"),
                "alerts": sum((alerts_by_host or {}).get(h, 0) for h in finding["members"]),
            }
            entry["line"] = common_cause_line(entry)
            found.append(entry)
    return sorted(found, key=lambda f: -int(f["shared_by"]))


def common_cause_line(finding: Mapping[str, Any]) -> str:
    """``common cause: rack r07 (rack power, cooling and NVLink trays): inspect it before reboot-node on
    8 nodes (8 of 8 hosts of the storm in it show gpu-fell-off-bus)``, and the member to start with when the
    Xids single one out."""
    from nightowl.fleet.domains import DOMAIN_SUSPECTS

    kind, name, count = finding["kind"], finding["name"], finding["shared_by"]
    suspect = DOMAIN_SUSPECTS.get(str(kind), str(kind))
    line = (
        f"common cause: {kind} {name} ({suspect}): inspect it before {finding['host_action']} on {count} nodes "
        f"({count} of {finding['of']} hosts of the storm in it show {finding['verdict']})"
    )
    primary = finding.get("primary")
    if isinstance(primary, Mapping) and primary.get("host"):
        line += f"; start with {primary['host']}: {primary.get('why')}"
    return line


class StormRecord:
    """Keeps a storm bundle's manifest ``alert`` current as each host finishes (``on_host_done``), so the
    manifest and the draft written with the bundle carry every host's outcome and the common cause.

    ``alert.storm`` is the whole record; the draft reads the bundle's manifest as untrusted input and keeps
    only an alert's scalar values (postmortem/bundle_reader.py), so the storm's headline facts are also
    written as scalars: ``storm_by``, ``storm_value``, ``storm_alerts``, ``storm_hosts``,
    ``storm_alerts_by_host`` (``r07-gpu-01 ×8, ...``) and ``storm_common_cause`` (the first finding's line)."""

    def __init__(self, alert: dict[str, Any], labelled: Mapping[str, Mapping[str, str]], order: list[str]) -> None:
        self.alert = alert  # the manifest's alert record, filled in place
        self.labelled = labelled
        self.order = order
        self._runs: dict[str, Any] = {}
        self._judged: list[dict[str, Any]] | None = None  # the common causes, once the last host is done
        self._lock = threading.Lock()
        self.alert.update(storm_scalars(alert["storm"]))

    def host_done(self, run: Any) -> None:
        with self._lock:
            self._runs[run.host] = run
            ordered = {h: self._runs[h] for h in self.order if h in self._runs}  # the storm's order, then any other
            runs = [*ordered.values(), *(r for h, r in self._runs.items() if h not in ordered)]
            storm = self.alert["storm"]
            storm["results"] = [result_of(r) for r in runs]
            if len(runs) >= len(self.order):  # judged once, when the last host is done (a storm may be 1024 hosts)
                storm["common_cause"] = self._judged = common_causes(runs, self.labelled, storm.get("alerts_by_host"))
            self.alert.update(storm_scalars(storm))

    def common_causes(self, runs: list[Any]) -> list[dict[str, Any]]:
        """The storm's domain findings for the run's Outcome (and so its status update and note): the ones
        judged for the manifest when the last host was done, not judged again, so the bundle and what the
        responders are told cannot differ. Judged here from ``runs`` only where no host was reported: a
        job-scoped runbook runs its members as one, without ``on_host_done``."""
        with self._lock:
            if self._judged is None:
                self._judged = common_causes(runs, self.labelled, self.alert["storm"].get("alerts_by_host"))
            return self._judged


def storm_scalars(storm: Mapping[str, Any]) -> dict[str, Any]:
    """The storm record's headline facts as scalar values (see :class:`StormRecord`)."""
    counts = storm.get("alerts_by_host") or {}
    causes = storm.get("common_cause") or []
    return {
        "storm_by": storm.get("by"),
        "storm_value": storm.get("value"),
        "storm_alerts": storm.get("alerts"),
        "storm_hosts": len(storm.get("hosts") or []),
        "storm_alerts_by_host": ", ".join(f"{host} ×{n}" for host, n in counts.items()),
        "storm_common_cause": causes[0]["line"] if causes else None,
    }


def result_of(run: Any) -> dict[str, Any]:
    """One host's entry in a storm's ``results``."""
    return {"host": run.host, "status": run.status, "verdict": run.verdict, "error": run.error}
