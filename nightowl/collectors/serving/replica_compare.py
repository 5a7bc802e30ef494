"""`replica-compare`: a derived collector: the first look across the replicas of one service.

It runs no command. From each replica's ``replica-health``, ``replica-models``, three
``replica-metrics`` scrapes half a window apart (``replica_metrics``, ``_mid``, ``_after``: the start, middle
and end of one ``window_seconds``), and, when
taken, ``container-state`` and ``stream-probe``, it answers the five questions of a first look
(after the vLLM/TGI production triage: alive? all or some? sudden or gradual? a recent change?
a traffic shift?) as lists of replicas a runbook can branch on and a verdict can name.

Windows: "before" is scrape 1 -> 2, "now" is scrape 2 -> 3; "history" is everything the engine
served up to scrape 2 (its counters since start). A ratio is None when either side has nothing
to divide, never a guess.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from nightowl.collectors.base import DerivedCollector, registered
from nightowl.collectors.serving import replica_findings
from nightowl.collectors.serving.engine_args import display

KIND = "replica-compare"
INPUTS = ("replica_health",)
SCRAPES = ("replica_metrics", "replica_metrics_mid", "replica_metrics_after")
KV_FULL = 0.9  # vLLM preempts when it cannot allocate blocks; >= 90% used with preemption is "full"
LATENCY_RATIO = 1.5  # a window mean this much above history is "up"
TRAFFIC_RATIO = 1.5  # requests per window this much above the window before is a surge
FLAT_TRAFFIC = 1.25  # below this ratio traffic counts as flat
SIGKILL_EXIT = 137
RECENT_START = 600.0  # an engine process younger than this at the first look restarted just before it


def _hist(scrape: Mapping[str, Any], name: str) -> tuple[float, float] | None:
    histogram = (scrape.get("histograms") or {}).get(name)
    if not isinstance(histogram, Mapping) or histogram.get("count") is None or histogram.get("sum") is None:
        return None
    return float(histogram["count"]), float(histogram["sum"])


def _mean_between(a: Mapping[str, Any], b: Mapping[str, Any], name: str) -> float | None:
    first, second = _hist(a, name), _hist(b, name)
    if first is None or second is None or second[0] - first[0] <= 0:
        return None
    return (second[1] - first[1]) / (second[0] - first[0])


def _lifetime_mean(scrape: Mapping[str, Any], name: str) -> float | None:
    values = _hist(scrape, name)
    return values[1] / values[0] if values and values[0] > 0 else None


def _requests(scrape: Mapping[str, Any]) -> float | None:
    for name in ("e2e", "ttft"):
        values = _hist(scrape, name)
        if values is not None:
            return values[0]
    value = scrape.get("request_success_total")
    return float(value) if isinstance(value, (int, float)) else None


def _delta(a: Mapping[str, Any], b: Mapping[str, Any], read: Any) -> float | None:
    first, second = read(a), read(b)
    if first is None or second is None or second < first:
        return None
    return float(second - first)


def _ratio(now: float | None, before: float | None) -> float | None:
    if now is None or before is None or before <= 0:
        return None
    return round(now / before, 3)


def _field(name: str) -> Any:
    return lambda s: s.get(name) if isinstance(s.get(name), (int, float)) else None


def _restarted(scrapes: list[Mapping[str, Any]]) -> bool:
    starts = {s.get("process_start_time") for s in scrapes if s.get("process_start_time") is not None}
    if len(starts) > 1:
        return True
    counts = [_requests(s) for s in scrapes]
    known = [c for c in counts if c is not None]
    return any(later < earlier for earlier, later in zip(known, known[1:], strict=False))


def _window(facts: Mapping[str, Any]) -> dict[str, Any]:
    """Sudden or gradual, traffic, errors and pressure of one replica from its three scrapes."""
    scrapes = [facts.get(n) or {} for n in SCRAPES]
    first, mid, last = scrapes
    if not all(s.get("has_samples") for s in scrapes):
        return {"scraped": False}
    before, now = _delta(first, mid, _requests), _delta(mid, last, _requests)
    out: dict[str, Any] = {
        "scraped": True,
        "restarted": _restarted(scrapes),
        "process_start_time": last.get("process_start_time"),
        "requests_before": before,
        "requests_now": now,
        "traffic_ratio": _ratio(now, before),
        "errors_now": _delta(mid, last, _field("http_5xx_total")),
        "waiting": last.get("requests_waiting"),
        "waiting_growth": _delta(first, last, _field("requests_waiting")),
        "running": last.get("requests_running"),
        "kv_cache_usage": last.get("kv_cache_usage"),
        "preemptions_now": _delta(first, last, _field("preemptions_total")),
    }
    for name in ("ttft", "itl", "e2e"):
        now_mean, history = _mean_between(mid, last, name), _lifetime_mean(mid, name)
        before_mean = _mean_between(first, mid, name)
        out[f"{name}_now"], out[f"{name}_history"] = now_mean, history
        out[f"{name}_ratio"] = _ratio(now_mean, history)
        # sudden: this window is up against the window before; gradual: both are up against history
        out[f"{name}_sudden"] = bool(now_mean and before_mean and now_mean >= before_mean * LATENCY_RATIO)
    for side, total in (("prompt", "prompt_tokens_total"), ("output", "generation_tokens_total")):
        tokens_before, tokens_now = _delta(first, mid, _field(total)), _delta(mid, last, _field(total))
        per_before = tokens_before / before if tokens_before is not None and before else None
        per_now = tokens_now / now if tokens_now is not None and now else None
        out[f"{side}_tokens_ratio"] = _ratio(per_now, per_before)
    return out


def _base_url(params: Mapping[str, Any], host: str) -> str | None:
    value = params.get("base_url")
    if isinstance(value, Mapping):
        value = value.get(host)
    return str(value).rstrip("/") if value else None


def _replica(host: str, facts: Mapping[str, Any], params: Mapping[str, Any]) -> dict[str, Any]:
    health = facts.get("replica_health") or {}
    models = facts.get("replica_models") or {}
    container = facts.get("container_state") or {}
    stream = facts.get("stream_probe") or {}
    window = _window(facts)
    started, server_time = _first_start(facts), health.get("server_time")
    uptime = server_time - started if started is not None and isinstance(server_time, (int, float)) else None
    recent = float(params.get("recent_start_seconds") or RECENT_START)
    base = _base_url(params, host)
    args, args_source = _engine_args(facts)
    gpus = (facts.get("nvidia_smi_query") or {}).get("gpu_names") or []
    return {
        "health_text": replica_findings.health_text(health),
        "host": host,
        "base_url": base,
        "alive": health.get("alive"),
        "health_status": health.get("health_status"),
        "health_seconds": health.get("health_seconds"),
        "no_answer": health.get("no_answer"),
        "version": health.get("version"),
        "model_id": models.get("model_id"),
        "model_root": models.get("model_root"),
        "max_model_len": models.get("max_model_len"),
        "exit_code": container.get("exit_code"),
        "oom_killed": container.get("oom_killed"),
        "restart_count": container.get("restart_count"),
        "stream_complete": stream.get("complete") if stream else None,
        "image": container.get("image"),
        "node": container.get("node"),
        "gpu_model": ", ".join(gpus) if gpus else None,
        "engine_args": args,
        "args_source": args_source,
        **window,
        "process_start_time": started if started is not None else window.get("process_start_time"),
        "last_start_time": window.get("process_start_time"),
        "server_time": server_time,
        # the replica's own clock on both sides (Date header, process start): no clock skew between them
        "uptime_seconds": max(0.0, uptime) if uptime is not None else None,
        "started_recently": uptime is not None and uptime < recent,
    }


def _first_start(facts: Mapping[str, Any]) -> float | None:
    """The engine's process start time from its first scrape taken (a down replica may answer one only)."""
    for name in SCRAPES:
        value = (facts.get(name) or {}).get("process_start_time")
        if isinstance(value, (int, float)):
            return float(value)
    return None


def _engine_args(facts: Mapping[str, Any]) -> tuple[dict[str, str] | None, str | None]:
    """What the engine started with: its start-up log first (what it took), else the container's options."""
    log = facts.get("engine_log") or {}
    if log.get("engine_args"):
        return dict(log["engine_args"]), str(log.get("engine_args_source"))
    container = facts.get("container_state") or {}
    if container.get("engine_args"):
        return dict(container["engine_args"]), "command line"
    return None, None


CONFIG_FIELDS = ("version", "model_root", "max_model_len", "image")  # the release: drift when they differ
PLACE_FIELDS = ("node", "gpu_model")  # where a replica runs: shared by the failing ones, never "drift"
TRAIT_NAMES = {
    "version": "engine version",
    "model_root": "weights",
    "max_model_len": "context length",
    "image": "image",
    "node": "node",
    "gpu_model": "GPU model",
    "engine_args": "engine arguments",
}
# Why a trait may be unknown: the evidence that names it and how to get it.
TRAIT_SOURCES = {
    "version": "no /version answer",
    "model_root": "no root in /v1/models",
    "max_model_len": "no max_model_len in /v1/models",
    "image": "no container-state: pass container or pod",
    "node": "no pod node: pass pod",
    "gpu_model": "no nvidia-smi answer",
    "engine_args": "no start-up log or command line: pass container, pod or engine_log_file",
}


def _drift(replicas: list[dict[str, Any]], baseline: Mapping[str, Any]) -> dict[str, list[str]]:
    """field -> replicas whose value differs from the recorded baseline, else from the majority."""
    drift: dict[str, list[str]] = {}
    for name in CONFIG_FIELDS:
        values = {r["host"]: r[name] for r in replicas if r.get(name) is not None}
        if not values:
            continue
        expected = baseline.get(name)
        if expected is None:
            counts = Counter(values.values()).most_common()
            if len(counts) < 2 or counts[0][1] == counts[1][1]:
                if len(counts) >= 2:  # no majority: every replica differs from some other
                    drift[name] = sorted(values)
                continue
            expected = counts[0][0]
        odd = sorted(h for h, v in values.items() if str(v) != str(expected))
        if odd:
            drift[name] = odd
    return drift


def _args_drift(replicas: list[dict[str, Any]], baseline: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Engine arguments that differ: per argument, the odd replicas, their values, and what was expected.

    Compared among the replicas whose arguments were read; an argument absent from one replica's
    non-default list or command line is its default there. Expected is the baseline's value
    (``baseline: {max_num_seqs: 256}`` or ``{args: {...}}``), else the majority's.
    """
    read = [r for r in replicas if r.get("engine_args") is not None]
    wanted = {**{k: v for k, v in baseline.items() if k not in CONFIG_FIELDS and k != "args"}}
    if isinstance(baseline.get("args"), Mapping):
        wanted.update(baseline["args"])
    if len(read) < 2 and not (read and wanted):
        return []
    drift = []
    # max_model_len is compared from /v1/models already (CONFIG_FIELDS): named once
    for arg in sorted(({a for r in read for a in r["engine_args"]} | set(wanted)) - set(CONFIG_FIELDS)):
        values = {r["host"]: r["engine_args"].get(arg, "default") for r in read}
        expected = display(wanted[arg]) if arg in wanted else _majority(values)
        odd = sorted(h for h, v in values.items() if expected is None or v != expected)
        if not odd or (arg not in wanted and len(set(values.values())) < 2):
            continue
        shown = ", ".join(f"{values[h]}" for h in odd)
        against = (
            f"the baseline {expected}"
            if arg in wanted
            else (f"{expected} on the others" if expected is not None else "each other")
        )
        drift.append(
            {
                "arg": arg,
                "hosts": odd,
                "values": {h: values[h] for h in odd},
                "expected": expected,
                "text": f"engine argument {arg} on {', '.join(odd)} is {shown} against {against}",
            }
        )
    return drift


def _majority(values: Mapping[str, str]) -> str | None:
    counts = Counter(values.values()).most_common()
    if len(counts) >= 2 and counts[0][1] == counts[1][1]:
        return None  # no majority: every replica differs from some other
    return counts[0][0] if counts else None


def _shared_args(down: list[dict[str, Any]], up: list[dict[str, Any]]) -> dict[str, Any]:
    """Engine arguments the failing replicas share with one value that no healthy replica has."""
    if not down or not up or any(r.get("engine_args") is None for r in down + up):
        return {}
    shared = {}
    for arg in sorted({a for r in down + up for a in r["engine_args"]}):
        down_values = {r["engine_args"].get(arg, "default") for r in down}
        up_values = {r["engine_args"].get(arg, "default") for r in up}
        if len(down_values) == 1 and not down_values & up_values:
            shared[f"engine argument {arg}"] = next(iter(down_values))
    return shared


NODE_TRAITS = ("image", "node", "gpu_model", "engine_args")  # read on the node only (container, log, GPUs)


def _not_compared(judged: list[dict[str, Any]], by_url: set[str]) -> list[str]:
    """Traits left out of the comparison on some replica, each with the evidence that would name it.

    The node's traits of replicas reached by URL only (``by_url``) are one line of ``not_checked``
    instead: no parameter would name them without the node."""
    out = []
    for name in (*CONFIG_FIELDS, *PLACE_FIELDS, "engine_args"):
        missing = [
            r["host"] for r in judged if r.get(name) is None and not (name in NODE_TRAITS and r["host"] in by_url)
        ]
        if missing:
            which = "any replica" if len(missing) == len(judged) else ", ".join(missing)
            out.append(f"{TRAIT_NAMES[name]} on {which} ({TRAIT_SOURCES[name]})")
    return out


def _shared(
    down: list[dict[str, Any]], up: list[dict[str, Any]], fields: tuple[str, ...] = CONFIG_FIELDS
) -> dict[str, Any]:
    """What the failing replicas have in common that the healthy ones do not (version, weights, context...)."""
    shared: dict[str, Any] = {}
    for name in fields:
        down_values = {r.get(name) for r in down}
        up_values = {r.get(name) for r in up}
        if len(down_values) == 1 and None not in down_values and up and not (down_values & up_values):
            shared[name] = next(iter(down_values))
    return shared


def not_checked(replicas: list[dict[str, Any]], params: Mapping[str, Any]) -> list[str]:
    """What this look did not check, so no verdict reads as an all-clear on it."""
    out = []
    if not params.get("stream_probe"):
        out.append("streamed answers (no stream probe: pass --param stream_probe=true)")
    url_only = sorted(by_url(params) & {r["host"] for r in replicas})
    if url_only:
        which = "any replica" if len(url_only) == len(replicas) else ", ".join(url_only)
        out.append(f"the node of {which} (container state, engine log, GPUs: reached by URL only; add --host)")
    return out


def by_url(params: Mapping[str, Any]) -> set[str]:
    """The replicas reached by URL only (``triage --replica``), whose node nothing reads."""
    value = params.get("reached_by_url")
    return {str(v) for v in value} if isinstance(value, (list, tuple)) else set()


def service(replicas: list[dict[str, Any]]) -> str | None:
    """The service as its replicas name it in /v1/models: the served model id (the most common one)."""
    ids = Counter(r["model_id"] for r in replicas if r.get("model_id"))
    return ids.most_common(1)[0][0] if ids else None


def derive(inputs: Mapping[str, Mapping[str, Any]], params: Mapping[str, Any] | None = None) -> dict[str, Any]:
    params = params or {}
    hosts = inputs.get("hosts") or {}
    replicas = [_replica(h, f, params) for h, f in sorted(hosts.items())]
    baseline = params.get("baseline") if isinstance(params.get("baseline"), Mapping) else {}
    slow_after = float(params.get("slow_seconds") or 1.0)
    down = [r for r in replicas if r["alive"] is False]
    up = [r for r in replicas if r["alive"] is True]
    judged = down + up
    scraped = [r for r in up if r.get("scraped")]
    now = sum(r["requests_now"] or 0 for r in scraped if r.get("requests_now") is not None)
    before = sum(r["requests_before"] or 0 for r in scraped if r.get("requests_before") is not None)
    drift = _drift(replicas, baseline or {})
    args_drift = _args_drift(replicas, baseline or {})

    def names(rows: list[dict[str, Any]]) -> list[str]:
        return [r["host"] for r in rows]

    latency_up = [
        r
        for r in scraped
        if any((r.get(f"{n}_ratio") or 0) >= LATENCY_RATIO for n in ("ttft", "itl"))
        and (r.get("traffic_ratio") is None or r["traffic_ratio"] < FLAT_TRAFFIC)
    ]
    out = {
        "kind": KIND,
        "replicas": replicas,
        "judged": len(judged),
        "down": names(down),
        "up": names(up),
        "unanswered": [r["host"] for r in down if r["health_status"] is None],
        # What keeps an all-clear from being claimed: a replica whose /health was not read, an up replica
        # without its three scrapes, or an asked-for stream probe that left no result.
        "unread": sorted(
            {r["host"] for r in replicas if r["alive"] is None}
            | {r["host"] for r in up if not r.get("scraped")}
            | ({r["host"] for r in up if r.get("stream_complete") is None} if params.get("stream_probe") else set())
        ),
        "all_down": bool(judged) and not up,
        "partial": bool(down) and bool(up),
        "down_share": {**_shared(down, up), **_shared_args(down, up)},
        "down_place": _shared(down, up, PLACE_FIELDS),
        "drift": drift,
        "args_drift": args_drift,
        "drifted": sorted(
            {h for hosts_ in drift.values() for h in hosts_} | {h for d in args_drift for h in d["hosts"]}
        ),
        "not_compared": _not_compared(judged, by_url(params)),
        "restarted": [
            r["host"]
            for r in replicas
            if r.get("restarted") or r.get("started_recently") or (r.get("restart_count") or 0) > 0
        ],
        "started_recently": [r["host"] for r in replicas if r.get("started_recently")],
        "not_checked": not_checked(replicas, params),
        "service": service(replicas),
        "oom": [r["host"] for r in replicas if r.get("oom_killed") is True or r.get("exit_code") == SIGKILL_EXIT],
        "slow": [r["host"] for r in up if (r.get("health_seconds") or 0) >= slow_after],
        "broken_stream": [r["host"] for r in up if r.get("stream_complete") is False],
        "kv_full": [
            r["host"]
            for r in scraped
            if (r.get("kv_cache_usage") or 0) >= KV_FULL and (r.get("preemptions_now") or 0) > 0
        ],
        "queue_growing": [r["host"] for r in scraped if (r.get("waiting_growth") or 0) > 0],
        "latency_up": names(latency_up),
        "sudden": [r["host"] for r in latency_up if r.get("ttft_sudden") or r.get("itl_sudden")],
        "requests_now": now if scraped else None,
        "requests_before": before if scraped else None,
        "traffic_ratio": _ratio(now, before) if scraped else None,
        "errors_now": sum(r.get("errors_now") or 0 for r in scraped) if scraped else None,
        "metrics_url_by_host": {r["host"]: f"{r['base_url']}/metrics" for r in replicas if r["base_url"]},
        "thresholds": _thresholds(slow_after),
    }
    return {**out, **_told(replicas, out, down, up, by_url(params))}


def _told(
    replicas: list[dict[str, Any]],
    compare: dict[str, Any],
    down: list[dict[str, Any]],
    up: list[dict[str, Any]],
    url_only: set[str],
) -> dict[str, Any]:
    """What the verdicts tell besides their finding: each finding once, the onset of each from its own replicas
    with the others as "also seen" lines, the follow-ups that can run from here, and what was compared."""
    found = replica_findings.findings(replicas, compare, TRAIT_NAMES)
    node_next, metrics_next = replica_findings.follow_ups(compare, url_only)
    fields = ("version", "model_root", "max_model_len", *(("image",) if any(r.get("image") for r in replicas) else ()))
    return {
        "findings": found,
        "onset": replica_findings.onsets(replicas, compare, found),
        "url_only": sorted(url_only & {r["host"] for r in replicas}),
        "node_next": node_next,
        "metrics_next": metrics_next,
        "release_compared": replica_findings.release_compared(down, up, fields, TRAIT_NAMES),
    }


def _thresholds(slow_after: float) -> dict[str, float]:
    """The thresholds the findings above used, for the verdict's prose and the bundle."""
    return {
        "kv_full": KV_FULL,
        "latency_ratio": LATENCY_RATIO,
        "traffic_ratio": TRAFFIC_RATIO,
        "flat_traffic": FLAT_TRAFFIC,
        "slow_seconds": slow_after,
    }


COLLECTOR = DerivedCollector(**registered(KIND), inputs=INPUTS, derive=derive)
