"""receiver/auth.py on its own (issue 30 mutation figures): token strength, bearer and cookie checks,
the session cookie's flags, the login form, the throttle's window and revocation."""

from __future__ import annotations

import pytest

from nightowl.receiver import auth

TOKEN = "0123456789abcdef-strong"


@pytest.mark.parametrize(
    ("token", "problem"),
    [
        ("a" * 15, "the bearer token has 15 characters, at least 16 are needed"),
        ("", "the bearer token has 0 characters, at least 16 are needed"),
        ("abcde" * 4, "the bearer token repeats too few characters (5 distinct, at least 6)"),
        ("abcdef" * 3, None),  # 18 characters, 6 distinct: just enough
        ("abcdefabcdefabcd", None),  # exactly 16
    ],
)
def test_token_problem(token: str, problem: str | None) -> None:
    assert auth.token_problem(token) == problem


def test_token_and_bearer_checks() -> None:
    assert auth.token_matches(TOKEN, TOKEN)
    assert not auth.token_matches(TOKEN + "x", TOKEN)
    assert not auth.token_matches("", "")
    assert not auth.token_matches("x", None)
    assert auth.bearer_ok(f"Bearer {TOKEN}", TOKEN)
    assert auth.bearer_ok(f"bearer  {TOKEN} ", TOKEN)
    assert not auth.bearer_ok(f"Basic {TOKEN}", TOKEN)
    assert not auth.bearer_ok(TOKEN, TOKEN)
    assert not auth.bearer_ok(None, TOKEN)
    assert not auth.bearer_ok("Bearer ", None)


def test_a_session_is_signed_and_expires() -> None:
    value = auth.new_session(TOKEN, 60, now=1000.0)
    expires, nonce, signature = value.split(".")
    assert expires == "1060" and len(nonce) == 16 and len(signature) == 64
    assert auth.session_ok(value, TOKEN, now=1059.9)
    assert not auth.session_ok(value, TOKEN, now=1060.0)  # expired at its second
    assert not auth.session_ok(value, TOKEN + "x", now=1000.0)  # a new token logs browsers out
    assert not auth.session_ok(value, None, now=1000.0)
    assert not auth.session_ok(None, TOKEN, now=1000.0)
    assert not auth.session_ok("", TOKEN, now=1000.0)
    assert not auth.session_ok(value + ".x", TOKEN, now=1000.0)
    forged = f"9999999999.{nonce}.{signature}"
    assert not auth.session_ok(forged, TOKEN, now=1000.0)
    # A signed payload whose expiry is not a number is refused too.
    payload = "soon.nonce"
    assert not auth.session_ok(f"{payload}.{auth._sign(TOKEN, payload)}", TOKEN, now=0.0)
    assert auth.new_session(TOKEN, 60) != auth.new_session(TOKEN, 60)  # a fresh nonce each time


def test_a_session_without_a_clock_uses_now() -> None:
    assert auth.session_ok(auth.new_session(TOKEN, 60), TOKEN)
    assert not auth.session_ok(auth.new_session(TOKEN, -1), TOKEN)


def test_session_from_a_cookie_header() -> None:
    assert auth.session_from(f"a=1; {auth.COOKIE}=v.1.2; b=2") == "v.1.2"
    assert auth.session_from("a=1") is None
    assert auth.session_from("") is None
    assert auth.session_from(None) is None
    assert auth.session_from('nightowl_session="unterminated') is None


def test_cookie_flags() -> None:
    assert auth.COOKIE == "nightowl_session"
    assert auth.set_cookie("v", 60.9, False) == "nightowl_session=v; Path=/; Max-Age=60; HttpOnly; SameSite=Strict"
    assert auth.set_cookie("v", 60, True) == "nightowl_session=v; Path=/; Max-Age=60; HttpOnly; SameSite=Strict; Secure"
    assert auth.clear_cookie(True) == "nightowl_session=; Path=/; Max-Age=0; HttpOnly; SameSite=Strict; Secure"
    assert auth.clear_cookie(False) == "nightowl_session=; Path=/; Max-Age=0; HttpOnly; SameSite=Strict"


@pytest.mark.parametrize(
    ("body", "form"),
    [
        (b"token=abc&next=%2Fbundles", ("abc", "/bundles")),
        (b"token=abc", ("abc", "/")),
        (b"next=/x", ("", "/x")),
        (b"", ("", "/")),
        (b"token=abc&next=%2F%2Fevil.example", ("abc", "/")),
        (b"token=a&token=b", ("a", "/")),
    ],
)
def test_login_form(body: bytes, form: tuple[str, str]) -> None:
    assert auth.login_form(body) == form


@pytest.mark.parametrize(
    ("path", "safe"),
    [
        ("/bundles?x=1", "/bundles?x=1"),
        ("/", "/"),
        ("//evil.example", "/"),
        ("https://evil.example", "/"),
        ("evil", "/"),
        ("/\\evil", "/"),
        ("/a\nb", "/"),
        ("/a\x1fb", "/"),
        ("/a b", "/a b"),  # a space (32) is a printable character
    ],
)
def test_safe_next(path: str, safe: str) -> None:
    assert auth.safe_next(path) == safe


def test_the_throttle_per_address_and_its_window() -> None:
    throttle = auth.LoginThrottle(per_address=2, in_all=10, window_s=60.0)
    assert throttle.retry_after("a", now=0.0) == 0.0
    assert throttle.failed("a", now=0.0) == 1
    assert throttle.retry_after("a", now=1.0) == 0.0
    assert throttle.failed("a", now=10.0) == 2
    assert throttle.retry_after("a", now=10.0) == 50.0  # the first failure leaves the window at 60
    assert throttle.retry_after("b", now=10.0) == 0.0
    assert throttle.retry_after("a", now=59.0) == 1.0
    assert throttle.retry_after("a", now=60.0) == 0.0  # a failure exactly one window old is gone
    assert throttle.failed("a", now=61.0) == 2  # only the one at 10 s is left, plus this one


def test_the_throttle_in_all() -> None:
    throttle = auth.LoginThrottle(per_address=5, in_all=3, window_s=30.0)
    for i, address in enumerate(("a", "b", "c")):
        assert throttle.failed(address, now=float(i)) == 1
    assert throttle.retry_after("d", now=5.0) == 25.0
    assert throttle.retry_after("d", now=30.0) == 0.0
    assert throttle.failed("a", now=31.0) == 1  # its failure at 0 has left the window


def test_the_throttle_defaults() -> None:
    throttle = auth.LoginThrottle()
    assert (throttle.per_address, throttle.in_all, throttle.window_s) == (5, 30, 60.0)
    assert throttle.retry_after("a") == 0.0
    assert throttle.failed("a") == 1


def test_sessions_are_this_processs_and_revocable() -> None:
    sessions, other = auth.Sessions(), auth.Sessions()
    value = sessions.new(TOKEN, 60)
    assert sessions.ok(value, TOKEN)
    assert not other.ok(value, TOKEN)  # another process's secret
    assert not auth.session_ok(value, TOKEN)  # not signed under the token alone
    assert not sessions.ok(value, None)
    assert not sessions.ok(value, "")
    assert not sessions.revoke(value, TOKEN + "x")
    assert sessions.revoke(value, TOKEN)
    assert not sessions.ok(value, TOKEN)
    assert not sessions.revoke(value, TOKEN)  # already revoked
    assert sessions.ok(sessions.new(TOKEN, 60), TOKEN)


def test_revocation_forgets_expired_cookies_only() -> None:
    sessions = auth.Sessions()
    short = sessions.new(TOKEN, 1)
    lasting = sessions.new(TOKEN, 3600)
    assert sessions.revoke(short, TOKEN) and sessions.revoke(lasting, TOKEN)
    assert set(sessions._revoked) == {short, lasting}
    assert sessions._revoked[lasting] == float(lasting.split(".")[0])
    sessions._revoked[short] = 0.0  # as if it had expired
    third = sessions.new(TOKEN, 60)
    assert sessions.revoke(third, TOKEN)
    assert set(sessions._revoked) == {lasting, third}


def test_a_failure_counts_only_the_window_it_is_in() -> None:
    throttle = auth.LoginThrottle(per_address=5, in_all=30, window_s=60.0)
    assert throttle.failed("a", now=0.0) == 1
    assert throttle.failed("a", now=100.0) == 1  # the one at 0 s left the window before this one
    assert throttle.failed("b", now=0.0) == 1
    assert throttle.failed("b", now=60.0) == 1  # exactly one window old: gone
    assert throttle.failed("b", now=60.5) == 2


def test_session_checks_answer_false_not_just_something_false() -> None:
    value = auth.new_session(TOKEN, 60, now=1000.0)
    assert auth.session_ok(value, TOKEN, now=1000.0) is True
    assert auth.session_ok(value, TOKEN + "x", now=1000.0) is False
    assert auth.session_ok(value, TOKEN, now=2000.0) is False
    assert auth.session_ok(None, TOKEN) is False
    sessions = auth.Sessions()
    assert sessions.ok(None, TOKEN) is False and sessions.revoke(None, TOKEN) is False
