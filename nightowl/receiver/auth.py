"""Who may read the receiver's pages: the bearer token (scripts) or a signed session cookie (browsers).

A browser logs in once at ``/login`` by posting the token; the answer sets ``nightowl_session``,
a cookie that is ``HttpOnly`` (no script reads it), ``SameSite=Strict`` (no other site's page can
send it along) and signed: ``<expiry>.<nonce>.<HMAC-SHA256>`` under a key derived from the token,
so it expires on its own and a new token logs every browser out. Every comparison of a secret is
constant-time (``hmac.compare_digest``). Cookies only ever let a browser *read*: posting alerts
still takes the bearer token.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from http.cookies import CookieError, SimpleCookie
from urllib.parse import parse_qs

COOKIE = "nightowl_session"
MAX_LOGIN_BODY = 4096


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
