"""Reach a serving replica by its URL alone (``first-look --replica r1=https://...``): no SSH, no node.

The serving collectors read a replica with ``curl`` argv lists (replica-health, replica-models,
replica-metrics, stream-probe). This transport answers those same argv lists in-process, over HTTP,
with the output curl would print, so the parsers, the bundle layout and replays stay one path whether
the replica was read from its node over SSH or from the on-call's laptop. Nothing else runs here: a
command that needs the node (``docker inspect``, ``journalctl``, ``nvidia-smi``) comes back as an error
result naming why, so its evidence is "not read", never "fine".

What it accepts, and refuses: only the curl options those collectors use (``-sS``, ``-i``, ``--fail``,
``--max-time``, ``-w`` with ``%{url_effective}``, ``%{http_code}``, ``%{time_total}``, ``-N``, ``-H``,
``--data-binary``); only http and https URLs under the replica's own base URL (no ``file://``, no other
host); GET only, except the stream probe's one POST (``kind`` ``stream-probe``, asked for with
``stream_probe=true``). curl's exit codes are kept (7 refused, 22 ``--fail`` on HTTP >= 400, 28 timed
out), so a refused connection reads as "down", as it does through SSH.
"""

from __future__ import annotations

import contextlib
import http.client
import re
import socket
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from urllib.parse import SplitResult, urlsplit

from nightowl.transports.base import CommandResult, TransportError

SCHEMES = ("http", "https")
POST_KINDS = ("stream-probe",)  # the one collector allowed a request body (a 1-token completion)
MAX_BYTES = 8 * 1024 * 1024  # a /metrics scrape of a big SGLang DP deployment is a few MB
USER_AGENT = "nightowl-first-look"
_WRITE_OUT = re.compile(r"%\{([A-Za-z_]+)\}")
# curl's exit codes (curl(1) EXIT CODES), so the parsers and the runbooks read both paths alike
CURL_COULDNT_CONNECT, CURL_HTTP_ERROR, CURL_TIMEOUT, CURL_RECV_ERROR = 7, 22, 28, 56


class Refused(ValueError):
    """An argv this transport will not run (another program, an option or URL outside what it allows)."""


@dataclass
class CurlCall:
    """One curl argv, read: the URLs and how to fetch them."""

    urls: list[str] = field(default_factory=list)
    fail: bool = False
    include: bool = False
    max_time: float | None = None
    write_out: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    data: str | None = None


_FLAGS = {"-s": None, "-S": None, "-sS": None, "-N": None, "--no-buffer": None, "--silent": None}


def read_curl(argv: Sequence[str]) -> CurlCall:
    """The curl argv a serving collector built -> what to fetch; raises :class:`Refused` for anything else."""
    if not argv or argv[0] != "curl":
        raise Refused(f"needs the node: `{argv[0] if argv else ''}` runs on the replica's host (give it with --host)")
    call, args, i = CurlCall(), list(argv[1:]), 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            call.urls += args[i + 1 :]
            break
        if arg in _FLAGS:
            pass
        elif arg in ("--fail", "-f"):
            call.fail = True
        elif arg in ("-i", "--include"):
            call.include = True
        elif arg in ("--max-time", "-m", "-w", "--write-out", "-H", "--header", "--data-binary") and i + 1 < len(args):
            _option(call, arg, args[i + 1])
            i += 1
        elif arg.startswith("-"):
            raise Refused(f"curl option {arg} is not one the serving collectors use")
        else:
            call.urls.append(arg)
        i += 1
    if not call.urls:
        raise Refused("no URL to fetch")
    return call


def _option(call: CurlCall, name: str, value: str) -> None:
    if name in ("--max-time", "-m"):
        call.max_time = float(value)
    elif name in ("-w", "--write-out"):
        call.write_out = value
    elif name in ("-H", "--header"):
        key, _, text = value.partition(":")
        call.headers[key.strip()] = text.strip()
    elif value.startswith("@"):
        raise Refused("--data-binary @file reads a local file: refused")
    else:
        call.data = value


def check_base_url(url: str) -> str:
    """The replica's base URL, checked as a ``url`` parameter is: http or https, a host, no spaces."""
    try:
        parts = urlsplit(url.strip())
    except ValueError as exc:
        raise TransportError(f"not a URL: {url!r}: {exc}") from None
    if parts.scheme.lower() not in SCHEMES or not parts.hostname or any(c.isspace() for c in url.strip()):
        raise TransportError(f"expects an http:// or https:// URL, got {url!r}")
    if parts.query or parts.fragment:
        raise TransportError(f"a replica's base URL has no query or fragment: {url!r}")
    if parts.username is not None or parts.password is not None:
        # they would be written into every bundle's manifest with the commands, and never sent anyway
        raise TransportError(f"a replica's base URL carries no user or password: {parts.hostname}")
    return url.strip().rstrip("/")


@dataclass(frozen=True)
class Answer:
    """One HTTP exchange as curl reports it: status (0: none), time, headers and body, curl's exit code."""

    status: int
    seconds: float
    head: str
    body: bytes
    rc: int
    error: str | None = None


class HttpTransport:
    """One replica, reached by its base URL from this machine (see the module's docstring)."""

    recorded = False

    def __init__(self, host: str, base_url: str, via: str = "--replica") -> None:
        self.host = host
        self.base_url = check_base_url(base_url)
        self.via = via  # the option that named this member (--replica, or --prometheus for a node's series)
        # connections in flight, so that close() (an interrupt) ends their reads at once
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._closes = 0  # how many times close() ran: a read it cut is no answer from the replica

    def connect(self) -> None:
        """Nothing to open: a replica that refuses connections is "down", a verdict, not "unreachable"."""
        return None

    def close(self) -> None:
        with self._lock:
            open_now, self._open = list(self._open), set()
            self._closes += 1
        for sock in open_now:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def run(self, argv: Sequence[str], timeout: float, kind: str | None = None) -> CommandResult:
        started, t0 = time.time(), time.monotonic()
        try:
            call = read_curl(argv)
            self._check(call, kind)
        except (Refused, ValueError) as exc:
            return CommandResult(tuple(argv), None, "", "", started, 0.0, error=f"refused over {self.via}: {exc}")
        deadline = t0 + max(0.0, timeout)
        closes = self._closes
        out: list[str] = []
        errors: list[str] = []
        rc = 0
        for url in call.urls:
            left = deadline - time.monotonic()
            if left <= 0:
                return self._result(argv, None, out, errors, started, t0, timed_out=True)
            limit = min(left, call.max_time) if call.max_time else left
            answer = fetch(url, call, limit, self._opened)
            if self._closes != closes:  # cut by close(): what came is not how the replica ended it
                return CommandResult(
                    tuple(argv), None, "".join(out), "", started, time.monotonic() - t0, error="closed while reading"
                )
            out.append(_shown(answer, call))
            if call.write_out is not None:
                out.append(_write_out(call.write_out, url, answer))
            if answer.rc:
                rc = answer.rc  # curl exits with the last failing transfer's code
                errors.append(f"curl: ({answer.rc}) {answer.error}")
        return self._result(argv, rc, out, errors, started, t0)

    def _opened(self, sock: socket.socket, is_open: bool) -> None:
        with self._lock:
            (self._open.add if is_open else self._open.discard)(sock)

    def _check(self, call: CurlCall, kind: str | None) -> None:
        for url in call.urls:
            if not (url == self.base_url or url.startswith(self.base_url + "/")):
                raise Refused(f"{url} is not under this replica's URL {self.base_url}")
        if call.data is not None and kind not in POST_KINDS:
            raise Refused(f"a request body from {kind or 'a collector'}: only the stream probe may POST")

    def _result(
        self,
        argv: Sequence[str],
        rc: int | None,
        out: list[str],
        errors: list[str],
        started: float,
        t0: float,
        timed_out: bool = False,
    ) -> CommandResult:
        return CommandResult(
            tuple(argv), rc, "".join(out), "\n".join(errors), started, time.monotonic() - t0, timed_out=timed_out
        )


Track = Callable[[socket.socket, bool], None]


def fetch(url: str, call: CurlCall, timeout: float, track: Track | None = None) -> Answer:
    """One request as curl makes it: GET (POST with a body), the response read up to MAX_BYTES or the
    deadline (a stream that never ends is read until then: curl's exit 28, with what came)."""
    parts = urlsplit(url)
    connection_type = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    t0 = time.monotonic()
    connection = connection_type(parts.netloc, timeout=max(0.05, timeout))
    held: list[socket.socket] = []
    try:
        return _exchange(connection, parts, call, t0, timeout, held, track)
    finally:
        connection.close()
        for sock in held:
            if track is not None:
                track(sock, False)
            with contextlib.suppress(OSError):
                sock.close()


def _exchange(
    connection: http.client.HTTPConnection,
    parts: SplitResult,
    call: CurlCall,
    t0: float,
    timeout: float,
    held: list[socket.socket],
    track: Track | None,
) -> Answer:
    deadline = t0 + timeout
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    headers = {"User-Agent": USER_AGENT, "Accept": "*/*", **call.headers}
    try:
        connection.connect()
        sock = connection.sock  # kept: getresponse() hands it to the response and forgets it
        held.append(sock)
        if track is not None:
            track(sock, True)
        connection.request("POST" if call.data is not None else "GET", path, body=call.data, headers=headers)
        response = connection.getresponse()
    except TimeoutError:
        return Answer(0, time.monotonic() - t0, "", b"", CURL_TIMEOUT, f"timed out after {timeout:.1f} s")
    except (OSError, http.client.HTTPException) as exc:
        return Answer(0, time.monotonic() - t0, "", b"", CURL_COULDNT_CONNECT, f"Failed to connect: {exc}")
    head = f"HTTP/1.1 {response.status} {response.reason}\r\n" + "".join(
        f"{k}: {v}\r\n" for k, v in response.getheaders()
    )
    body, rc, error = _read_body(response, sock, deadline)
    seconds = time.monotonic() - t0
    if call.fail and response.status >= 400:
        return Answer(
            response.status, seconds, head, b"", CURL_HTTP_ERROR, f"The requested URL returned error: {response.status}"
        )
    return Answer(response.status, seconds, head, body, rc, error)


def _read_body(
    response: http.client.HTTPResponse, sock: socket.socket | None, deadline: float
) -> tuple[bytes, int, str | None]:
    """The body as it comes, each read bounded by what is left of the deadline (curl's --max-time)."""
    chunks: list[bytes] = []
    size = 0
    try:
        while size < MAX_BYTES:
            left = deadline - time.monotonic()
            if left <= 0:
                return b"".join(chunks), CURL_TIMEOUT, "Operation timed out"
            if sock is not None:
                sock.settimeout(left)
            chunk = response.read1(65536)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except TimeoutError:
        return b"".join(chunks), CURL_TIMEOUT, "Operation timed out"
    except (OSError, http.client.HTTPException) as exc:
        return b"".join(chunks), CURL_RECV_ERROR, f"Failure when receiving data from the peer: {exc}"
    return b"".join(chunks), 0, None


def _shown(answer: Answer, call: CurlCall) -> str:
    text = answer.body.decode("utf-8", errors="replace")
    if call.include and answer.status:
        return answer.head + "\r\n" + text
    return text


def _write_out(template: str, url: str, answer: Answer) -> str:
    """curl's ``-w``: the variables the serving collectors use, and its ``\\n`` escape."""
    values = {
        "url_effective": url,
        "http_code": f"{answer.status:03d}",
        "time_total": f"{answer.seconds:.6f}",
    }
    text = _WRITE_OUT.sub(lambda m: values.get(m.group(1).lower(), m.group(0)), template)
    return text.replace("\\n", "\n")
