"""`/login` under attack (issue 30, item 14): throttled and logged, a token of real strength, and a
logout that revokes the session on the server, not only in the browser that logged out."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from nightowl.receiver import auth
from nightowl.receiver.config import ConfigError, load_config
from nightowl.receiver.queue import Receiver
from tests.receiver.test_serve import TOKEN, Running, write_config
from tests.receiver.test_serve_browser import fetch, login


@pytest.fixture
def running(tmp_path: Path) -> Iterator[tuple[Running, list[str]]]:
    lines: list[str] = []
    receiver = Receiver(load_config(write_config(tmp_path)), log=lines.append)
    receiver.start()
    serving = Running(receiver)
    serving.thread.start()
    yield serving, lines
    serving.server.shutdown()
    serving.server.server_close()
    receiver.stop(timeout=5)


def test_failed_logins_are_throttled_and_logged(running: tuple[Running, list[str]]) -> None:
    server, lines = running
    codes = [login(server.url, f"guess-{i}")[0] for i in range(auth.LOGIN_FAILURES_PER_ADDRESS + 3)]
    assert codes[: auth.LOGIN_FAILURES_PER_ADDRESS] == [401] * auth.LOGIN_FAILURES_PER_ADDRESS
    assert set(codes[auth.LOGIN_FAILURES_PER_ADDRESS :]) == {429}, codes
    status, headers, _ = login(server.url, TOKEN)  # even the right token waits out the window
    assert status == 429 and int(headers["retry-after"]) > 0
    refused = [line for line in lines if "login refused from 127.0.0.1" in line]
    assert len(refused) == auth.LOGIN_FAILURES_PER_ADDRESS and TOKEN not in "".join(lines)
    assert all("guess" not in line for line in lines)  # what was tried is never logged


def test_the_throttle_counts_per_address_and_in_all() -> None:
    throttle = auth.LoginThrottle(per_address=2, in_all=3, window_s=60)
    throttle.failed("a", now=0)
    assert throttle.retry_after("a", now=1) == 0
    throttle.failed("a", now=1)
    assert throttle.retry_after("a", now=2) == pytest.approx(58)
    assert throttle.retry_after("b", now=2) == 0  # another address is not held back by a's guesses
    throttle.failed("b", now=2)
    assert throttle.retry_after("c", now=3) == pytest.approx(57)  # three in all: everyone waits
    assert throttle.retry_after("a", now=61.5) == 0  # the window moved on


def test_logout_revokes_the_session(running: tuple[Running, list[str]]) -> None:
    server, lines = running
    status, headers, _ = login(server.url, TOKEN)
    assert status == 303
    cookie = headers["set-cookie"].split(";", 1)[0]
    assert fetch(server.url, path="/", headers={"Cookie": cookie})[0] == 200
    fetch(server.url, "POST", "/logout", headers={"Cookie": cookie})
    # A copy of the cookie (another tab, a stolen header) is refused from now on.
    assert fetch(server.url, path="/", headers={"Cookie": cookie})[0] == 401
    assert any("logout from 127.0.0.1" in line for line in lines)
    # A session signed with the token alone (as before, or by another process) is not this server's.
    forged = f"{auth.COOKIE}={auth.new_session(TOKEN, 3600)}"
    assert fetch(server.url, path="/", headers={"Cookie": forged})[0] == 401


@pytest.mark.parametrize("weak", ["abcd", "x" * 40, "aaaabbbbccccdddd"])
def test_a_weak_token_is_refused_at_start_up(tmp_path: Path, weak: str) -> None:
    path = write_config(tmp_path)
    path.write_text(path.read_text().replace(f"token: {TOKEN}", f"token: {weak}"))
    with pytest.raises(ConfigError, match=r"serve.yaml: token: the bearer token"):
        load_config(path)
    assert auth.token_problem(TOKEN) is None
