"""Rendering the draft through Jinja2 templates (built-in or a user's own); jinja2 is imported lazily."""

from __future__ import annotations

import functools
import os
import re
from pathlib import Path
from typing import Any
from urllib.parse import quote

from nightowl.engine import layout
from nightowl.outcome import counted
from nightowl.paths import data_dir
from nightowl.postmortem.bundle_reader import RUN_DRAFT_READ_SECONDS, Bundle, load
from nightowl.postmortem.context import bundle_context
from nightowl.postmortem.svg import decision_svg


def _environment(template: str | None, fmt: str) -> tuple[Any, str]:
    folders = [str(p) for p in _user_template_dirs()] + [str(data_dir("templates"))]
    name = f"postmortem.{fmt}.j2"
    if template:
        candidate = Path(template).expanduser()
        if candidate.is_file():
            folders.insert(0, str(candidate.parent))
            name = candidate.name
        else:
            name = template if template.endswith(".j2") else f"{template}.{fmt}.j2"
    return _shared_environment(tuple(folders)), name


@functools.lru_cache(maxsize=16)
def _shared_environment(folders: tuple[str, ...]) -> Any:
    """One jinja2 Environment per template search path: it keeps the compiled templates (and recompiles
    one whose file changed), so `watch` and `serve` do not spend a second compiling them for each bundle."""
    from jinja2 import ChoiceLoader, Environment, FileSystemLoader, StrictUndefined, select_autoescape

    env = Environment(
        loader=ChoiceLoader([FileSystemLoader(f) for f in folders]),
        undefined=StrictUndefined,
        autoescape=select_autoescape(["html.j2", "html"], default_for_string=False),
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["md_cell"] = lambda v: str(v).replace("|", "\\|").replace("\n", " ")
    env.filters["code"] = _inline_code
    env.filters["counted"] = counted  # "1 host", "8 hosts" (nightowl/outcome.py)
    # A bundle path as a link: host folders are percent-encoded names (``fe80%3A%3A1``), so the link
    # encodes the ``%`` again, or the browser would decode it and ask for a folder that does not exist.
    env.filters["urlpath"] = lambda v: quote(str(v), safe="/")
    return env


def _inline_code(text: Any) -> Any:
    """HTML: escape, then show `backticked` spans as <code>."""
    from markupsafe import Markup, escape

    return Markup(re.sub(r"`([^`]+)`", r"<code>\1</code>", str(escape(text))))


def _user_template_dirs() -> list[Path]:
    """A user folder overrides the built-in templates: $NIGHTOWL_TEMPLATES, then ~/.config/nightowl/templates."""
    dirs = []
    if os.environ.get("NIGHTOWL_TEMPLATES"):
        dirs.append(Path(os.environ["NIGHTOWL_TEMPLATES"]).expanduser())
    dirs.append(Path(os.environ.get("XDG_CONFIG_HOME", "~/.config")).expanduser() / "nightowl" / "templates")
    return [d for d in dirs if d.is_dir()]


def render_bundle(
    bundle: Path, template: str | None = None, fmt: str = "md", redact: bool = False, data: Bundle | None = None
) -> str:
    """The draft of ``bundle`` as Markdown (``fmt="md"``) or a self-contained HTML page; ``data`` is the
    bundle already loaded (see :func:`render_drafts`)."""
    data = data or load(Path(bundle))  # read and hashed once for the whole draft
    context = bundle_context(data)
    from nightowl.safetext import all_one_line

    # What an alert or a node wrote fills one line of the draft each: a newline cannot forge a line.
    for key in ("headline", "title", "detection", "impact_sentence", "trigger", "timeline", "unplaced", "hosts"):
        if key in context:
            context[key] = all_one_line(context[key])
    if fmt == "html":
        from markupsafe import Markup

        context["svgs"] = {p["host"]: Markup(decision_svg(data.runbook, p["path"])) for p in context["paths"]}
        # Raw files hold names the redactor has not learned: a redacted draft carries no copy of them.
        context["raw"] = [] if redact else raw_views(data, cited_lines(context))
    context["redacted"] = redact
    env, name = _environment(template, fmt)
    text = env.get_template(name).render(**context)
    if redact:
        text = redactor_for(data).apply(text)
    from nightowl.safetext import printable

    return printable(text)  # what a node printed never reaches a reader's terminal as escape sequences


MAX_VIEW_LINES = 5000  # lines of one raw file copied into the HTML draft (cited lines are always copied)


def raw_views(data: Bundle, cited: dict[str, set[int]]) -> list[dict[str, Any]]:
    """The bundle's text files, line by line, for the HTML draft's browsable copy: every citation
    links to ``#E<n>-L<line>`` there, so a reader lands on the line the claim rests on. Long files
    are copied up to MAX_VIEW_LINES, plus every line a citation names."""
    from nightowl.postmortem.outputs import lines_of

    views = []
    for evidence in data.evidence:
        if evidence.state == "missing" or evidence.path.endswith((layout.RC, layout.TIMEOUT)):
            continue
        lines = lines_of(data, evidence.path)
        if any("\x00" in line for line in lines[:50]):
            continue  # not text
        keep = cited.get(evidence.id, set())
        shown = [(n, line) for n, line in enumerate(lines, start=1) if n <= MAX_VIEW_LINES or n in keep]
        views.append(
            {
                "id": evidence.id,
                "path": evidence.path,
                "sha256": evidence.sha256,
                "shown": shown,
                "cut": len(lines) - len(shown),
            }
        )
    return views


MAX_CITED_SPAN = 200  # a citation wider than this (a fact read from a whole file) copies its first and last lines


def _span(start: int, end: int) -> range | tuple[int, int]:
    """The lines a citation copies into the draft: all of a short one; the two ends of a wide one (the
    whole 500,000-line log a fact was read from would otherwise be copied into the HTML)."""
    return range(start, end + 1) if end - start < MAX_CITED_SPAN else (start, end)


def cited_lines(value: Any, out: dict[str, set[int]] | None = None) -> dict[str, set[int]]:
    """Every line a citation in the context names, by evidence id (both ends only of a wide one)."""
    from nightowl.postmortem.citations import Cite

    out = {} if out is None else out
    if isinstance(value, Cite):
        out.setdefault(value.id, set()).update(_span(value.start, value.end))
    elif isinstance(value, dict):
        if "anchor" in value and "start" in value and "id" in value:
            out.setdefault(value["id"], set()).update(_span(value["start"], value["end"]))
        for item in value.values():
            cited_lines(item, out)
    elif isinstance(value, (list, tuple)):
        for item in value:
            cited_lines(item, out)
    return out


def redactor_for(data: Bundle) -> Any:
    """A Redactor that already knows the names the bundle holds (hosts, the alert's labels)."""
    from nightowl.redact import Redactor

    redactor = Redactor()
    redactor.learn_hosts(h.get("host") for h in data.verdicts.get("hosts", []))
    alert = data.alert or {}
    labels = alert.get("labels") or {}
    redactor.learn_hosts([alert.get("host"), alert.get("host_spec")])
    redactor.learn_hosts(
        str(v)
        for k, v in labels.items()
        if k.lower() in ("instance", "host", "hostname", "node", "nodename", "exported_instance", "pod")
    )
    return redactor


def render_drafts(bundle: Path, parsed: Any = None, history: Path | None = None) -> str:
    """The run's drafts from one read of the bundle: ``postmortem.html`` written beside it (owner-only;
    citations link to the browsable copy of each raw file), the Markdown returned for ``postmortem.md``.
    The hook a run gives the bundle writer, so a capture reads and hashes its evidence once for both;
    ``parsed``: the run's parse results (engine/parse_memo.py), so the draft reads what the verdict saw;
    ``history``: the store the run records into (its RunContext's)."""
    data = load(Path(bundle), RUN_DRAFT_READ_SECONDS)  # the run's verdict is printed after its drafts
    data.kept, data.history = parsed, history
    _write_html(Path(bundle), lambda: render_bundle(bundle, fmt="html", data=data))
    return render_bundle(bundle, data=data)


def write_html_draft(bundle: Path) -> Path | None:
    """``postmortem.html`` for a bundle that has none (``serve`` asked for it); ``None`` when it cannot be rendered."""
    return _write_html(Path(bundle), lambda: render_bundle(Path(bundle), fmt="html"))


def _write_html(bundle: Path, html: Any) -> Path | None:
    """A draft that cannot be rendered costs only itself: the evidence is already saved."""
    from nightowl.engine.private_files import write_private

    target = bundle / layout.POSTMORTEM_HTML
    try:
        write_private(target, html())
    except Exception:  # noqa: BLE001 - a draft is a convenience on top of the saved evidence
        target.unlink(missing_ok=True)
        return None
    return target


def warm_templates() -> None:
    """Compile the built-in draft templates now, so a daemon's (`watch`) first bundle does not wait for it."""
    for fmt in ("md", "html"):
        env, name = _environment(None, fmt)
        env.get_template(name)
