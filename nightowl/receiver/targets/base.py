"""What every notify target shares: the configured target, the interface a target module implements, and
the text helpers that keep a message one line per line and within a size limit.

A target is one module in this folder (``chat.py``, ``pagerduty.py``, ``webhook.py``) holding ``KIND`` (its
key in the ``notify`` section), ``RANK`` (where it comes in the config's order), ``KEYS`` (its settings),
``parse`` (its settings into a :class:`Target`) and ``request`` (an :class:`~nightowl.outcome.Outcome` into
the URL, headers and JSON body it posts); ``targets/__init__.py`` finds them. Nothing outside its module keys
on the target's kind.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from nightowl.outcome import Outcome

CUT = "… (cut to fit; the whole status update is in the bundle)"


@dataclass(frozen=True)
class Target:
    """One configured target: its kind, where it posts and what it posts with."""

    kind: str  # a target module's KIND: pagerduty | chat | webhook
    url: str  # the PagerDuty REST API base, or the webhook's URL
    token: str | None = None  # PagerDuty REST API key, or the generic webhook's bearer token
    sender: str | None = None  # PagerDuty: the From header (a PagerDuty user's email)
    incident_label: str | None = None  # PagerDuty: the label or annotation naming the incident id


# (url, headers, JSON body) of one message
Request = tuple[str, dict[str, str], Any]


class TargetKind(Protocol):
    """The interface of a target module (see the module docstring)."""

    KIND: str
    RANK: int
    KEYS: frozenset[str]

    def parse(self, doc: Mapping[str, Any], where: str) -> Target:
        """The target's settings (already known to be a mapping of its own keys); ValueError names ``where``."""
        ...

    def request(self, target: Target, outcome: Outcome, link: str | None) -> Request:
        """The message for one outcome; LookupError when it does not apply (``skipped``, with the reason)."""
        ...


def headline(outcome: Outcome) -> str:
    """``nightowl: XidError on gpu-17: gpu-fell-off-bus (critical) -> reboot-node``, one line: a title with a
    newline must not forge a second line of a note or message."""
    from nightowl.safetext import one_line

    return one_line(f"nightowl: {outcome.title or 'alert'} on {outcome.host or '-'}: {outcome.line}")


def required_url(doc: Mapping[str, Any], where: str) -> str:
    """The target's ``url`` (``url``, ``url_file`` or ``url_env``, receiver/credentials.py), an http(s) URL."""
    from nightowl.receiver.credentials import read_secret

    url = read_secret(doc, "url", where)
    if not url:
        raise ValueError(f"{where}: needs url, url_file or url_env (the variable is unset or empty)")
    return http_url(url, where)


def http_url(url: str, where: str) -> str:
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"{where}: {url.split('?')[0][:40]!r} is not an http(s) URL")
    return url


def fit(lines: list[str], limit: int, join: str = "\n") -> str:
    """``lines`` joined, within ``limit`` characters: whole lines while they fit, then the next one cut with a
    mark saying so. A line is never split into two, and the result never ends inside an escape."""
    out: list[str] = []
    used = 0
    for line in lines:
        extra = len(line) + (len(join) if out else 0)
        if used + extra <= limit:
            out.append(line)
            used += extra
            continue
        room = limit - used - (len(join) if out else 0) - len(CUT)
        if room > 20:
            out.append(_cut(line, room) + CUT)
        elif out and len(out[-1]) > len(CUT) + 20:
            out[-1] = _cut(out[-1], len(out[-1]) - len(CUT)) + CUT
        break
    return join.join(out)


def _cut(line: str, room: int) -> str:
    cut = line[: max(0, room)]
    amp = cut.rfind("&")  # never leave half of an escaped `&lt;` behind
    if amp != -1 and ";" not in cut[amp:]:
        cut = cut[:amp]
    return cut.rstrip()
