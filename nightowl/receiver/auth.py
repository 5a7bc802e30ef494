"""Who may read the receiver's pages: the bearer token (scripts) or a signed session cookie (browsers).

A browser logs in once at ``/login`` by posting the token; the answer sets ``nightowl_session``,
a cookie that is ``HttpOnly`` (no script reads it), ``SameSite=Strict`` (no other site's page can
send it along) and signed: ``<expiry>.<nonce>.<HMAC-SHA256>`` under a key derived from the token,
so it expires on its own and a new token logs every browser out. Every comparison of a secret is
constant-time (``hmac.compare_digest``). Cookies only ever let a browser *read*: posting alerts
still takes the bearer token.

The token must have real strength (``token_problem``), failed logins are throttled per address and
in all (``LoginThrottle``), and logging out revokes the session on the server, not only in the browser
(``Sessions``: the signing key also carries a secret of this process, so no session outlives it).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
import time
from collections import deque
from http.cookies import CookieError, SimpleCookie
from urllib.parse import parse_qs

COOKIE = "nightowl_session"
MAX_LOGIN_BODY = 4096
MIN_TOKEN_CHARS = 16  # `openssl rand -hex 16` gives 32; a guessable token makes the throttle moot
MIN_TOKEN_DISTINCT = 6
LOGIN_WINDOW_S = 60.0
LOGIN_FAILURES_PER_ADDRESS = 5  # failures an address may make in a window before it is refused
LOGIN_FAILURES_IN_ALL = 30  # and all addresses together (a guess spread over many addresses)


def token_problem(token: str) -> str | None:
    """Why a bearer token is too weak to guard the receiver, or None."""
    if len(token) < MIN_TOKEN_CHARS:
        return f"the bearer token has {len(token)} characters, at least {MIN_TOKEN_CHARS} are needed"
    if len(set(token)) < MIN_TOKEN_DISTINCT:
        return (
            f"the bearer token repeats too few characters ({len(set(token))} distinct, at least {MIN_TOKEN_DISTINCT})"
        )
    return None


def _key(token: str) -> bytes:
    return hmac.new(token.encode(), b"nightowl serve session v1", hashlib.sha256).digest()


def _sign(token: str, payload: str) -> str:
    return hmac.new(_key(token), payload.encode(), hashlib.sha256).hexdigest()


def token_matches(offered: str, token: str | None) -> bool:
    return bool(token) and hmac.compare_digest(offered.encode(), str(token).encode())


def bearer_ok(header: str | None, token: str | None) -> bool:
    scheme, _, offered = (header or "").partition(" ")
    return scheme.lower() == "bearer" and token_matches(offered.strip(), token)


def new_session(token: str, lifetime_s: float, now: float | None = None) -> str:
    expires = int((time.time() if now is None else now) + lifetime_s)
    payload = f"{expires}.{secrets.token_urlsafe(12)}"
    return f"{payload}.{_sign(token, payload)}"


def session_ok(value: str | None, token: str | None, now: float | None = None) -> bool:
    """A cookie value this token signed and that has not expired."""
    if not value or not token or value.count(".") != 2:
        return False
    payload, _, signature = value.rpartition(".")
    if not hmac.compare_digest(signature.encode(), _sign(token, payload).encode()):
        return False
    expires = payload.split(".", 1)[0]
    return expires.isdigit() and int(expires) > (time.time() if now is None else now)


def session_from(cookie_header: str | None) -> str | None:
    if not cookie_header:
        return None
    jar: SimpleCookie = SimpleCookie()
    try:
        jar.load(cookie_header)
    except CookieError:
        return None
    morsel = jar.get(COOKIE)
    return morsel.value if morsel else None


def set_cookie(value: str, lifetime_s: float, secure: bool) -> str:
    flags = "; Secure" if secure else ""
    return f"{COOKIE}={value}; Path=/; Max-Age={int(lifetime_s)}; HttpOnly; SameSite=Strict{flags}"


def clear_cookie(secure: bool) -> str:
    return set_cookie("", 0, secure)


def login_form(body: bytes) -> tuple[str, str]:
    """(token, next) from an ``application/x-www-form-urlencoded`` login post."""
    fields = parse_qs(body.decode(errors="replace"), max_num_fields=4)
    return (fields.get("token") or [""])[0], safe_next((fields.get("next") or ["/"])[0])


def safe_next(path: str) -> str:
    """Where to go after logging in: a path on this server only, never another site (``//evil``)."""
    if not path.startswith("/") or path.startswith("//") or "\\" in path or any(ord(c) < 32 for c in path):
        return "/"
    return path


class LoginThrottle:
    """Failed logins per address and in all within a sliding window; beyond either, logins are refused
    (even the right token) until the window has moved on, so guessing costs minutes, not microseconds."""

    def __init__(
        self,
        per_address: int = LOGIN_FAILURES_PER_ADDRESS,
        in_all: int = LOGIN_FAILURES_IN_ALL,
        window_s: float = LOGIN_WINDOW_S,
    ) -> None:
        self.per_address, self.in_all, self.window_s = per_address, in_all, window_s
        self._failures: dict[str, deque[float]] = {}
        self._all: deque[float] = deque()
        self._lock = threading.Lock()

    def _prune(self, now: float) -> None:
        while self._all and self._all[0] <= now - self.window_s:
            self._all.popleft()
        for address in list(self._failures):
            times = self._failures[address]
            while times and times[0] <= now - self.window_s:
                times.popleft()
            if not times:
                del self._failures[address]

    def retry_after(self, address: str, now: float | None = None) -> float:
        """Seconds until ``address`` may try again (0: it may try now)."""
        now = time.monotonic() if now is None else now
        with self._lock:
            self._prune(now)
            waits = [0.0]
            mine = self._failures.get(address) or deque()
            if len(mine) >= self.per_address:
                waits.append(mine[-self.per_address] + self.window_s - now)
            if len(self._all) >= self.in_all:
                waits.append(self._all[-self.in_all] + self.window_s - now)
            return max(waits)

    def failed(self, address: str, now: float | None = None) -> int:
        """Record one failure; how many ``address`` made in the window."""
        now = time.monotonic() if now is None else now
        with self._lock:
            self._prune(now)
            self._failures.setdefault(address, deque()).append(now)
            self._all.append(now)
            return len(self._failures[address])


class Sessions:
    """Sessions this process issued: signed under the token and a secret of this process, revocable."""

    def __init__(self) -> None:
        self._process_secret = secrets.token_hex(16)
        self._revoked: dict[str, float] = {}  # cookie value -> its expiry (forgotten once it has expired)
        self._lock = threading.Lock()

    def _signing(self, token: str) -> str:
        return f"{token}\x00{self._process_secret}"

    def new(self, token: str, lifetime_s: float, now: float | None = None) -> str:
        return new_session(self._signing(token), lifetime_s, now)

    def ok(self, value: str | None, token: str | None, now: float | None = None) -> bool:
        if not token or not session_ok(value, self._signing(token), now):
            return False
        with self._lock:
            return value not in self._revoked

    def revoke(self, value: str | None, token: str | None) -> bool:
        """Logging out: the cookie is refused from now on, even if a copy of it is replayed."""
        if not self.ok(value, token):
            return False
        now = time.time()
        with self._lock:
            self._revoked = {v: t for v, t in self._revoked.items() if t > now}
            self._revoked[str(value)] = float(str(value).split(".", 1)[0])
        return True
