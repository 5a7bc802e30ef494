"""One normaliser in front of every parser: the ways an output reaches nightowl other than straight from
the command, undone in one place and named, so each parser reads the format and not one file.

Real outputs arrive pasted into issues, chats and tickets, escaped by a web page, tagged by a launcher or
a log collector. Each *family* below is detected on the text (most on a sample of its first lines, so a
5 MB boot log pays a few hundred microseconds) and applied to every line it fits; ``normalise`` returns
the text a parser reads and the names of the families it applied (recorded in the facts and the bundle,
which keeps the output as received):

- ``escapes``: terminal escape sequences (collectors/escapes.py);
- ``crlf``: CRLF line ends (Windows pastes, serial consoles);
- ``html-entities``: ``&gt;``, ``&lt;``, ``&amp;``, ``&quot;``, ``&#39;``, ``&nbsp;`` of a web page, and
  no-break spaces (HTML Living Standard, "named character references");
- ``autolinks``: what a web editor took for a URL and made a Markdown link of, the link's text being the URL
  without its scheme (``transport/[net_ib.cc:101](http://net_ib.cc:101/)``, ``[10.1.3.201](http://10.1.3.201/)``),
  put back as the text;
- ``diff``: a block quoted on the added side of a unified diff, every line led by ``+`` (an output pasted into
  a README or runbook change and copied from the review: ``+> [Fri Aug 30 11:43:09 2024] NVRM: Xid ...``);
- ``quote``: a whole block quoted with ``> `` (Markdown, e-mail) or ``# ``/``// `` comment markers;
- ``prompt``: shell prompts and the command line they echo (``$ nvidia-smi``, ``root@gpu-17:~# dmesg``);
- ``launcher-prefix``: per-line tags of launchers and collectors on most lines: Open MPI's
  ``--tag-output`` ``[1,0]<stdout>:``, ``[0]``/``[rank0]:``/``[default0]:`` rank tags, srun ``--label``'s
  ``0: ``, Ray's ``(<actor or task> pid=<pid>, ip=<ip>) `` and SkyPilot's ``(head, rank=0, pid=<pid>) ``
  worker tags, the CRI log format's ``<RFC3339> stdout F `` (Kubernetes' kubelet), docker's ``-t`` stamp,
  ``kubectl logs --prefix``'s ``[pod/NAME/CONTAINER] ``, docker compose's ``service-1  | ``, pdsh/clush's
  ``host: `` and ``[date time] host:`` stamps;
- ``logfmt-field``: another program's log line carried whole in one logfmt field of most lines (a Kata
  Containers shim logging its guest's console through containerd: ``... vmconsole="[   13.25] NVRM: ..."``);
  the field's value, unescaped, is the line read, and the carrier's own lines are left out;
- ``syslog-prefix``: a syslog or journal prefix (``Jan  2 03:04:05 host prog[pid]: ``, ISO-stamped
  journal lines) on a kind that is not a kernel log (the kernel-log reader reads those prefixes itself);
- ``indent``: indentation common to every line of a block (a pasted code block);
- ``wrapped``: a line a terminal or page broke inside an XML tag (``-q -x`` pasted in a narrow window).

Only a family that fits is applied, and each is checked on a sample of the text first, so an output
straight from the command comes back as the very same object, with no family named.
"""

from __future__ import annotations

import html
import re
import threading
from dataclasses import dataclass

from nightowl.collectors.escapes import strip_escapes

# Lines looked at to decide whether a per-line family fits (a prefix on "most" lines is judged here).
SAMPLE_LINES = 400
# Rounds of the steps at most (nested wrappers), and the families applied once only (unescaping twice would
# turn an escaped "&amp;lt;" of the output itself into "<").
MAX_ROUNDS = 4
_ONCE = frozenset({"html-entities", "autolinks", "diff", "quote", "comment", "logfmt-field"})
# Share of the sampled lines with text a per-line prefix must be on to be taken as the output's wrapper.
PREFIX_SHARE = 0.6

# Families a kind's own parser reads, so they are left to it: the kernel-log reader takes time and host
# from syslog/journal prefixes, the NCCL log reader takes each line's rank from its launcher tag.
KEPT_BY_KIND: dict[str, frozenset[str]] = {
    # (and a bare "date time.ms " in front of a kernel or Fabric Manager line may be the log's own time)
    "kernel-log": frozenset({"syslog-prefix", "collector-stamp"}),
    "kernel-log-boots": frozenset({"syslog-prefix", "collector-stamp"}),
    "fabric-manager": frozenset({"syslog-prefix", "collector-stamp"}),
    "nccl-log": frozenset({"launcher-prefix", "syslog-prefix"}),
    # Their own lines start with "# " (# HELP, nccl-tests' header): no comment block to unwrap. And these
    # readers take what they need from the echoed command itself (the collective of `./all_reduce_perf`, the
    # fields of `--query-gpu=`, the level of `dcgmi diag -r 2`, the engine of `python -m sglang...`), or
    # skip a prompt line on their own (the port readers).
    "metrics": frozenset({"comment", "prompt"}),
    "nccl-tests": frozenset({"comment", "prompt"}),
    "dcgmi-diag": frozenset({"prompt"}),
    "nvidia-smi-query": frozenset({"prompt"}),
    "ib-ports": frozenset({"prompt"}),
    # the engine-log reader reads docker compose's "service  | " itself (the service often names the engine), and
    # the "(Worker_TP1 pid=N) " tags of an engine's processes (a worker's name tells its rank)
    "engine-log": frozenset({"compose", "prompt", "ray"}),
}
# Words that end in a colon at the start of log lines and are no host name (pdsh's "host: " prefix).
_NOT_HOSTS = frozenset(
    [
        "info",
        "warning",
        "warn",
        "error",
        "debug",
        "critical",
        "fatal",
        "notice",
        "note",
        "trace",
        "traceback",
        "caused",
        "exception",
        "errors",
        "valueerror",
        "runtimeerror",
        "assertionerror",
        "keyerror",
        "torch.outofmemoryerror",
        "nvrm",
        "nvidia",
    ]
)


@dataclass(frozen=True)
class Normalised:
    """The text a parser reads and the families applied to get it (empty: the text as received)."""

    text: str
    families: tuple[str, ...]


_ENTITY = re.compile(r"&(?:gt|lt|amp|quot|apos|nbsp|#\d{1,5}|#x[0-9a-fA-F]{1,4});")
_RAW_TAG = re.compile(r"<[A-Za-z?!/]")
_PROMPT = re.compile(
    r"^\s*(?:"
    r"(?:\([\w.-]+\)\s*)?[\w.-]+@[\w.-]+(?::\s*)?[^\s#$]*\s*[#$%]"  # user@host:~$ (with a (venv) before it)
    r"|\[[\w.-]+@[\w.-]+[^\]]*\][#$]"  # [user@host dir]$
    r"|PS [A-Za-z]:\\[^>]*>"  # PowerShell
    r"|[$%#]"  # a bare $ / # / % prompt
    r")\s*(?:sudo\s+(?:-\S+\s+)*)?"
    r"(?:nvidia-smi|dmesg|journalctl|cat|grep|egrep|tail|head|less|ibstat|ibstatus|ibv_devinfo|rdma|perfquery"
    r"|iblinkinfo|ibdev2netdev|systemctl|python3?|vllm|docker|kubectl|mpirun|srun|torchrun|text-generation-launcher"
    r"|curl|dcgmi|lspci|modprobe|nvidia-\w+|sh|bash|\./\S+|\S+_perf)\b.*$"
)


def echoed_command(line: str) -> bool:
    """Whether ``line`` is a shell prompt with the command it ran (``$ sudo dmesg``, ``user@host:~# journalctl -k``):
    no output of the command, what the prompt family removes."""
    return _PROMPT.match(line) is not None


# docker compose's "service-1  | " before each line (the compose family below).
_COMPOSE_PREFIX = re.compile(r"^[\w.-]+(?:[-_]\d+)?\s+\| ")


def compose_service(line: str) -> str | None:
    """The service a docker compose prefix on ``line`` names (``tgi-service-1``), None without one."""
    match = _COMPOSE_PREFIX.match(line)
    return _wrapper_name(match.group(0)) if match is not None else None


def without_compose_prefix(line: str) -> str:
    """``line`` as its service printed it: a docker compose ``service-1  | `` prefix taken off."""
    return _COMPOSE_PREFIX.sub("", line, count=1)


_BARE_PROMPT = re.compile(r"\s*(?:\([\w.-]+\)\s*)?[\w.-]+@[\w.-]+:?[^\s]*\s*[#$]\s*|\s*\[[\w.-]+@[^\]]*\][#$]\s*")
_QUOTE_MARKS = ("> ", ">")
_COMMENT_MARKS = ("# ", "// ")

_RAY_PREFIX = re.compile(
    r"^\((?:"
    r"(?:[A-Za-z_][\w.:/<>-]*(?:\([^()\s]*\))?,? )?(?:rank=\d+,? )?pid=\d+"  # [name[,] ][rank=N[,] ]pid=N
    r"|raylet|autoscaler(?: \+[\dhms]+)?"  # Ray's own processes: no pid
    r")(?:, ip=[\w.:-]+)?\)(?: |$)"
)
# The tail Ray's log deduplication appends to a line it printed for several workers.
_RAY_REPEATED = re.compile(r" \[repeated \d+x across cluster\]$")
# Per-line prefixes of launchers and log collectors; group 0 is the prefix removed.
_LAUNCHER_PREFIXES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("cri", re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d) (?:stdout|stderr) [FP] ")),
    # the tag alone: the space after it may be the line's own (see _open_mpi_tag)
    ("open-mpi", re.compile(r"^\[\d+,\d+\]<(?:stdout|stderr|stddiag)>:")),
    # Ray's driver-forwarded worker output, "(<actor or task name> pid=<pid>, ip=<ip>) " (ray/_private/worker.py
    # print_worker_logs; "(raylet) ", "(autoscaler +1m2s) " for its own processes), and SkyPilot's Ray-style job
    # tags "(<task>, pid=<pid>) ", "(head, rank=0, pid=<pid>) ", "(worker1, rank=1, pid=<pid>, ip=<ip>) "
    # (sky/skylet/executor); vLLM's own "(VllmWorker rank=0 pid=<pid>) " copies the shape.
    ("ray", _RAY_PREFIX),
    ("kubectl-prefix", re.compile(r"^\[pod/[\w.-]+/[\w.-]+\] ")),
    ("compose", _COMPOSE_PREFIX),
    ("rank-tag", re.compile(r"^\[(?:rank|default)?\d{1,5}\](?::\s?|\s|(?=\S))")),
    ("srun-label", re.compile(r"^\s{0,4}\d{1,5}: ")),
    ("docker-stamp", re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6,9}Z ")),
    # a log collector's or a console's "2024-06-25 12:27:29.905 " (Python logging's asctime "...,905 ") on every
    # line, traceback lines too: what the program printed follows it
    ("collector-stamp", re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d[.,]\d{3,9} ")),
    # pdsh/clush "host: ": a name with a digit in it (gpu-17, node01, dgx1), never a tool's own "NVRM: "
    (
        "pdsh-host",
        re.compile(r"^(?:\[\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d[^\]]*\]\s+)?[A-Za-z][\w.-]*\d[\w.-]*: "),
    ),
)
_UNMISTAKABLE = frozenset({"cri", "open-mpi", "kubectl-prefix", "docker-stamp", "ray"})
# Any of them, in one pass a line: most outputs carry none, and trying each in turn on each sample line was most of
# a steady sweep round's normalising.
_ANY_LAUNCHER_PREFIX = re.compile("|".join(f"(?:{pattern.pattern})" for _, pattern in _LAUNCHER_PREFIXES))
# A syslog (RFC 3164) or journal (``journalctl -o short``/``short-iso``) prefix naming a program.
_SYSLOG_PREFIX = re.compile(
    r"^(?:<\d{1,3}>)?(?:[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d"
    r"|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?)"
    r" [\w.-]+ [\w./@-]+(?:\[\d+\])?: "
)
_LEADING = re.compile(r"^[ \t]*")
# A logfmt field holding a quoted value (Go's logrus/logfmt quoting: \" and \\ escaped) ...
_LOGFMT_FIELD = re.compile(r'(?:^|\s)(?P<key>[A-Za-z_][\w.-]*)="(?P<value>(?:[^"\\]|\\.)*)"')
# ... whose value is itself a log line: a kernel's [seconds] stamp or an ISO/syslog time, then its text.
# (A stamp alone is the wrapper's own time= field, not a carried line: text must follow it, and a zone is no
# text: Go's time.String() writes "2025-08-13 00:17:30.1 +0000 UTC m=+0.1", others "... 00:17:30 UTC".)
_CARRIED_LINE = re.compile(
    r"(?:\[\s*\d+\.\d+\]|(?:\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d\S*|[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d)"
    r"(?!\s+(?:[+-]\d\d:?\d\d|[A-Z]{3,4})(?:\s|$)))\s+\S"
)


def normalise(text: str, kind: str = "") -> Normalised:
    """``text`` as a parser of ``kind`` should read it, and the families applied (see the module doc)."""
    return _memo(text, kind)


def _normalise(text: str, kind: str) -> Normalised:
    if not isinstance(text, str) or not text:
        return Normalised(text, ())
    families: list[str] = []
    stripped = strip_escapes(text)
    if stripped is not text:
        families.append("escapes")
    text = stripped
    if "\r\n" in text:
        text = text.replace("\r\n", "\n")
        families.append("crlf")
    kept = KEPT_BY_KIND.get(kind, frozenset())
    # Wrappers nest in any order (a CRI tag around a docker stamp, a prompt under a launcher's tag, an indented
    # paste of tagged lines): the steps run again while one of them still finds something, a few rounds at
    # most. An output as the command printed it costs one round of checks.
    for _round in range(MAX_ROUNDS):
        found = False
        for family, step in _STEPS:
            if family in kept or (family in _ONCE and family in families):
                continue
            changed = step(text, kept)
            if changed is not None and changed != text:
                text, found = changed, True
                if family not in families:
                    families.append(family)
        if not found:
            break
    return Normalised(text, tuple(families))


def _html_entities(text: str, _kept: frozenset[str] = frozenset()) -> str | None:
    if "&" not in text and "\xa0" not in text:
        return None
    head = text[:65536]
    if _ENTITY.search(head) is None:
        return text.replace("\xa0", " ") if "\xa0" in text else None
    if _RAW_TAG.search(head) and head.lstrip().startswith("<"):
        return None  # real XML/HTML: its entities are its own
    return html.unescape(text).replace("\xa0", " ")


# A link whose target is its own text behind a scheme (GitHub's and most editors' autolinking of file names,
# hosts and addresses); a link to anything else is the writer's own and stays.
_AUTOLINK = re.compile(r"\[(?P<text>[^\[\]\s()]{1,200})\]\((?:(?:https?|ftp)://|mailto:)(?P=text)/?\)")


def _autolinks(text: str, _kept: frozenset[str] = frozenset()) -> str | None:
    if "](" not in text:
        return None
    changed = _AUTOLINK.sub(r"\g<text>", text)
    return changed if changed != text else None


def _sample(text: str) -> list[str]:
    lines = []
    for line in text.split("\n", SAMPLE_LINES)[:SAMPLE_LINES]:
        if line.strip():
            lines.append(line)
    return lines


# A line that is only a table border ("+-----+", "+=====+"): nvidia-smi's own lines start with "+" too.
_BORDER = re.compile(r"\+[-=+]*\s*")


def _diff(text: str, _kept: frozenset[str] = frozenset()) -> str | None:
    """The block without the ``+`` of a diff's added side, when every line with text carries it. A bare table
    always has ``|`` rows, so a text all of whose lines start with ``+`` is no table, unless it is only borders."""
    lines = [line for line in text.split("\n") if line.strip()]
    if not lines or not all(line.startswith("+") for line in lines):
        return None
    if all(_BORDER.fullmatch(line) for line in lines):
        return None
    return "\n".join(line[1:] if line.startswith("+") else line for line in text.split("\n"))


def _quote(text: str, _kept: frozenset[str] = frozenset()) -> str | None:
    return _marked(text, _QUOTE_MARKS)


def _comment(text: str, _kept: frozenset[str] = frozenset()) -> str | None:
    return _marked(text, _COMMENT_MARKS)


def _marked(text: str, marks: tuple[str, ...]) -> str | None:
    """The block without the quote or comment mark every line with text carries."""
    lines = [line for line in text.split("\n") if line.strip()]
    if not lines:
        return None
    for mark in marks:
        bare = mark.strip()
        if all(line.lstrip().startswith(bare) for line in lines) and sum(
            line.lstrip().startswith(mark) or line.strip() == bare for line in lines
        ) >= max(1, len(lines) * 0.8):
            if bare == "#" and len(lines) < 2:
                return None
            return "\n".join(_unquote(line, bare) for line in text.split("\n"))
    return None


def _unquote(line: str, bare: str) -> str:
    body = line.lstrip()
    if not body.startswith(bare):
        return line
    body = body[len(bare) :]
    return body[1:] if body.startswith(" ") else body


def _prompt(text: str, _kept: frozenset[str] = frozenset()) -> str | None:
    """Shell prompts and the command lines they echo removed, and a bare prompt left at the end."""
    lines = text.split("\n")
    drop = {i for i, line in enumerate(lines[:SAMPLE_LINES]) if _PROMPT.match(line)}
    kept = [line for i, line in enumerate(lines) if i not in drop]
    tail = []
    while kept and not kept[-1].strip():
        tail.append(kept.pop())  # the output's own last line break(s), kept below
    while kept and _BARE_PROMPT.fullmatch(kept[-1]):
        kept.pop()
    kept += tail
    return "\n".join(kept) if len(kept) != len(lines) else None


def _launcher_prefix(text: str, kept: frozenset[str] = frozenset()) -> str | None:
    sample = _sample(text)
    if not sample or not any(_ANY_LAUNCHER_PREFIX.match(line) for line in sample):
        return None
    for _name, pattern in _LAUNCHER_PREFIXES:
        if _name in kept:
            continue
        hits = [m.group(0) for line in sample if (m := pattern.match(line))]
        # One line can carry a prefix no output starts with (CRI's stream tag, Open MPI's, kubectl's pod path);
        # a bare "[0] " or "host: " needs most of several lines to be a wrapper rather than the output's own.
        least = 1 if _name in _UNMISTAKABLE else 2
        if len(hits) < max(least, PREFIX_SHARE * len(sample)):
            continue
        if _name in ("pdsh-host", "compose") and len({_wrapper_name(h) for h in hits}) > 1:
            continue  # several hosts or services interleaved: not one output's wrapper
        if _name == "pdsh-host" and _wrapper_name(hits[0]).lower().startswith(tuple(_NOT_HOSTS)):
            continue
        if _name == "open-mpi":
            pattern = _open_mpi_tag(pattern, text)
        lines = [pattern.sub("", line, count=1) for line in text.split("\n")]
        if _name == "ray":
            lines = [_RAY_REPEATED.sub("", line) for line in lines]
        if _name in ("rank-tag", "open-mpi"):
            lines = _unglued(lines, {h.strip() for h in hits})
        return "\n".join(lines)
    return None


def _open_mpi_tag(tag: re.Pattern[str], text: str) -> re.Pattern[str]:
    """The tag and the space after it where every tagged line with text carries one (a paste or a wrapper that
    wrote ``tag: line``), else the tag alone: ``mpirun --tag-output`` prints the line right after the tag, so a
    space there is the line's own (a continuation line, a right-aligned column)."""
    rests = [line[m.end() :] for line in text.split("\n")[:SAMPLE_LINES] if (m := tag.match(line))]
    rests = [rest for rest in rests if rest.strip()]
    if rests and all(rest.startswith(" ") for rest in rests):
        return re.compile(tag.pattern + " ?")
    return tag


def _unglued(lines: list[str], tags: set[str]) -> list[str]:
    """Lines without the launcher's tag where it also stands inside them: a rank that writes one line in
    several ``printf`` calls, unbuffered under ``mpirun --tag-output``, gets the tag before each piece
    (``sum      -1[0]    1626.5    0.64``). Only a tag glued to a number and followed by a blank is taken,
    so an index in the text (``outputs[0] is None``) stays."""
    alternatives = "|".join(re.escape(t) for t in sorted(tags, key=len, reverse=True))
    glued = re.compile(r"(?<=[\d.])(?:" + alternatives + r")(?=\s)")
    if not any(glued.search(line) for line in lines[:SAMPLE_LINES]):
        return lines
    return [glued.sub(" ", line) for line in lines]


def _wrapper_name(prefix: str) -> str:
    """The host or service a pdsh or compose prefix names (its stamp left out)."""
    return prefix.rsplit("]", 1)[-1].strip().rstrip(":|").strip()


def _logfmt_field(text: str, _kept: frozenset[str] = frozenset()) -> str | None:
    """The log lines one logfmt field carries on most lines (``vmconsole="[ 13.2] NVRM: ..."``), unescaped.
    A field whose values are the wrapper's own (``time=``, ``msg=`` text) never starts with a log stamp."""
    sample = _sample(text)
    if not sample or '="' not in text[:4096]:
        return None
    counts: dict[str, int] = {}
    for line in sample:
        for match in _LOGFMT_FIELD.finditer(line):
            if _CARRIED_LINE.match(match.group("value")):
                counts[match.group("key")] = counts.get(match.group("key"), 0) + 1
    if not counts:
        return None
    key, hits = max(counts.items(), key=lambda item: item[1])
    if hits < max(1, PREFIX_SHARE * len(sample)):
        return None
    carried = [
        _unescape_logfmt(match.group("value"))
        for line in text.split("\n")
        for match in _LOGFMT_FIELD.finditer(line)
        if match.group("key") == key
    ]
    return "\n".join(carried) + ("\n" if text.endswith("\n") else "")


def _unescape_logfmt(value: str) -> str:
    return re.sub(r"\\(.)", lambda m: {"n": " ", "t": "\t"}.get(m.group(1), m.group(1)), value)


def _syslog_prefix(text: str, _kept: frozenset[str] = frozenset()) -> str | None:
    sample = _sample(text)
    hits = sum(1 for line in sample if _SYSLOG_PREFIX.match(line))
    if not sample or hits < max(2, PREFIX_SHARE * len(sample)):
        return None
    return "\n".join(_SYSLOG_PREFIX.sub("", line, count=1) for line in text.split("\n"))


def _indent(text: str, _kept: frozenset[str] = frozenset()) -> str | None:
    if not text[:1].isspace() and "\n" not in text[:1]:
        first = text.split("\n", 1)[0]
        if first.strip():
            return None  # the first line starts at column 0: nothing is common
    lines = text.split("\n")
    widths = [len(_LEADING.match(line).group(0).expandtabs(8)) for line in lines if line.strip()]  # type: ignore[union-attr]
    if not widths:
        return None
    common = min(widths)
    if common == 0:
        return None
    return "\n".join(_dedent(line, common) for line in lines)


def _dedent(line: str, width: int) -> str:
    if not line.strip():
        return ""
    lead = _LEADING.match(line).group(0)  # type: ignore[union-attr]
    expanded = lead.expandtabs(8)
    return expanded[width:] + line[len(lead) :]


_BROKEN_TAG = re.compile(r"<([A-Za-z_][\w.-]*)>([^<\n]*)\n\s*([^<\n]*)</\1>")


def _wrapped(text: str, _kept: frozenset[str] = frozenset()) -> str | None:
    """An XML document whose element text a window wrapped onto the next line (``<a>x\\n  y</a>``)."""
    head = text.lstrip()[:200]
    if not head.startswith("<") or "nvidia_smi_log" not in text[:4096] or _BROKEN_TAG.search(text) is None:
        return None
    return _BROKEN_TAG.sub(lambda m: f"<{m.group(1)}>{m.group(2).rstrip()} {m.group(3).lstrip()}</{m.group(1)}>", text)


# In this order: entities first (a page escapes everything), then the wrappers from the outside in.
_STEPS = (
    ("html-entities", _html_entities),
    ("autolinks", _autolinks),
    ("diff", _diff),
    ("quote", _quote),
    ("comment", _comment),
    ("prompt", _prompt),
    ("logfmt-field", _logfmt_field),
    ("launcher-prefix", _launcher_prefix),
    ("syslog-prefix", _syslog_prefix),
    ("indent", _indent),
    ("wrapped", _wrapped),
)

_last = threading.local()


def _memo(text: str, kind: str) -> Normalised:
    """The last result again for the very same text object and kind (the engine asks for the families
    and then parses: a boot log is normalised once)."""
    last = getattr(_last, "value", None)
    if last is not None and last[0] is text and last[1] == kind:
        return last[2]  # type: ignore[no-any-return]
    result = _normalise(text, kind)
    _last.value = (text, kind, result)
    return result
