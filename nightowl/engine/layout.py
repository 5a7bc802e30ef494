"""The layout of an evidence bundle (docs/reference.md#recorded-hosts-and-bundles), named once for everyone:
the writer, the verifier, the postmortem and status-update drafts, the receiver, history, MCP and the CLI.

::

    <run_id>/manifest.json      every command (argv, exit, sha256) and every file with its sha256
    <run_id>/manifest.sha256    the manifest's own hash (sha256sum format)
    <run_id>/verdicts.json      one verdict per host (what ``triage --format json`` prints)
    <run_id>/trace.json         per host the path walked and every condition's values
    <run_id>/runbook.yaml       the runbook as it ran
    <run_id>/postmortem.md      the postmortem draft (postmortem.html beside it when rendered)
    <run_id>/status-update.md   the status update, re-rendered after the manifest
    <run_id>/outcome.json       what the run concluded (nightowl/outcome.py), written after the manifest it cites
    <run_id>/hosts/<host>/<kind>.out   a collector's raw output (.err .rc .timeout .truncated .late beside it)
    <run_id>/next/              bundles of the runbooks ``triage --follow`` ran next
    <run_id>/parsed/hosts/<host>/<kind>.out.json   what the run parsed of an output it stored scrubbed
"""

from __future__ import annotations

import hashlib
from urllib.parse import quote, unquote

# What a raw output is stored as, and the files beside it (each only when it says something): the
# transports' own names, since the replay transport reads them back (it may not import the engine).
from nightowl.transports.base import ERR as ERR
from nightowl.transports.base import LATE as LATE
from nightowl.transports.base import OUT as OUT
from nightowl.transports.base import RC as RC
from nightowl.transports.base import TIMEOUT as TIMEOUT
from nightowl.transports.base import TRUNCATED as TRUNCATED
from nightowl.transports.base import UNREACHABLE as UNREACHABLE

MANIFEST = "manifest.json"
MANIFEST_HASH = "manifest.sha256"  # sha256sum format: `<hex>  manifest.json`
VERDICTS = "verdicts.json"
TRACE = "trace.json"
RUNBOOK = "runbook.yaml"
POSTMORTEM = "postmortem.md"
POSTMORTEM_HTML = "postmortem.html"
STATUS_UPDATE = "status-update.md"
# The run's Outcome as JSON (origin, verdict, host status, the manifest's sha256): written after the manifest,
# since it names the manifest's sha256; bundles written before it was kept have none.
OUTCOME = "outcome.json"
# A sweep's fleet page (nightowl/fleet/sweep_page.py), written with its bundle after the manifest: `serve` shows
# the newest one in its bundle folder (docs/receiver.md).
SWEEP_PAGE = "sweep.html"
HOSTS = "hosts"  # hosts/<host_dirname(host)>/<kind>.out
NEXT = "next"  # next/<run_id>/: a followed runbook's own bundle
PARSED = "parsed"  # parsed/<output's bundle path>.json: the run's parse of an output stored scrubbed
# The drafts and the record rendered from a bundle (never evidence of the run itself).
DRAFT_FILES = frozenset({POSTMORTEM, POSTMORTEM_HTML, STATUS_UPDATE, OUTCOME, SWEEP_PAGE})

_MAX_DIRNAME = 200  # file systems allow 255 bytes per name


def host_dirname(host: str) -> str:
    """A host's folder name: percent-encoded, so it is unique and reversible (``gpu 1`` -> ``gpu%201``,
    ``gpu_1`` stays ``gpu_1``); ``.``/``..`` and hidden names are encoded; an over-long name is cut and
    suffixed with its hash (still unique; the manifest keeps the full name)."""
    encoded = quote(host, safe="-_") or "%"
    if encoded.startswith("."):
        encoded = "%2E" + encoded[1:]
    if len(encoded) > _MAX_DIRNAME:
        encoded = (
            encoded[: _MAX_DIRNAME - 17].rstrip("%0123456789ABCDEF")
            + "~"
            + hashlib.sha256(host.encode()).hexdigest()[:16]
        )
    return encoded


def host_from_dirname(name: str) -> str:
    """The host a folder was named after (the inverse of ``host_dirname`` for names it did not cut)."""
    return unquote(name)


# Written after the manifest: the status update (re-rendered from verdicts.json), the HTML draft, the outcome and a
# sweep's fleet page.
AFTER_MANIFEST = frozenset({STATUS_UPDATE, POSTMORTEM_HTML, OUTCOME, SWEEP_PAGE})


def host_folder(host: str) -> str:
    """The host's folder inside the bundle, as the manifest cites it: ``hosts/<host_dirname(host)>``."""
    return f"{HOSTS}/{host_dirname(host)}"


def parsed_copy(rel: str) -> str:
    """Where a bundle keeps what the run parsed of its output ``rel`` (``hosts/<host>/<kind>.out``), when it kept it."""
    return f"{PARSED}/{rel}.json"


def first_take(rel: str) -> str:
    """``kind.out`` renamed ``kind.1.out`` when the collector ran twice (the writer's ``_next_stem``)."""
    return rel[: -len(OUT)] + ".1" + OUT if rel.endswith(OUT) else rel
