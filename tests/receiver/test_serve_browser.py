"""`nightowl serve` from a browser: login and session cookie, raw bundle files, a real Chromium."""

from __future__ import annotations

import base64
import http.client
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from nightowl.receiver import auth
from tests.receiver.test_serve import TOKEN, bundles, payload, serve  # noqa: F401 - `serve` is a fixture

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def fetch(
    url: str, method: str = "GET", path: str = "/", body: bytes | None = None, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], str]:
    """One request, redirects not followed (urllib would follow the 303 and hide the Set-Cookie)."""
    conn = http.client.HTTPConnection(urlsplit(url).netloc, timeout=20)
    conn.request(method, path, body=body, headers=headers or {})
    response = conn.getresponse()
    result = response.status, {k.lower(): v for k, v in response.getheaders()}, response.read().decode()
    conn.close()
    return result


def login(url: str, token: str, nxt: str = "/") -> tuple[int, dict[str, str], str]:
    body = f"token={token}&next={nxt}".encode()
    return fetch(url, "POST", "/login", body, {"Content-Type": "application/x-www-form-urlencoded"})


def captured(serve: Any, tmp_path: Path) -> Any:  # noqa: F811
    running = serve()
    first = payload("alertmanager-xid-firing.json")
    running.request("POST", "/alertmanager", dict(first, alerts=first["alerts"][:1]))
    running.wait_idle()
    return running, bundles(tmp_path)[0]


def test_a_browser_logs_in_and_gets_a_strict_httponly_session(serve: Any, tmp_path: Path) -> None:  # noqa: F811
    running, bundle = captured(serve, tmp_path)
    draft = f"/captures/{bundle.name}/postmortem.html"
    # A browser without a session is sent to the login page; a script gets JSON 401 as before.
    status, headers, _ = fetch(running.url, path=draft, headers={"Accept": "text/html,*/*"})
    assert status == 303 and headers["location"] == "/login?next=%2Fcaptures%2F" + bundle.name + "%2Fpostmortem.html"
    status, headers, body = fetch(running.url, path=draft)
    assert status == 401 and json.loads(body)["error"] and "bearer" in headers["www-authenticate"].lower()
    status, _, page = fetch(running.url, path="/login?next=" + draft)
    assert status == 200 and 'type="password" name="token"' in page and f'value="{draft}"' in page

    assert login(running.url, "wrong", draft)[0] == 401
    status, headers, _ = login(running.url, TOKEN, draft)
    assert status == 303 and headers["location"] == draft
    cookie = headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Max-Age=43200" in cookie and "Path=/" in cookie
    session = cookie.split(";", 1)[0]
    status, _, html = fetch(running.url, path=draft, headers={"Cookie": session})
    assert status == 200 and "gpu-fell-off-bus" in html
    status, _, index = fetch(running.url, path="/", headers={"Cookie": session})
    assert status == 200 and "<td>critical</td>" in index and f"/captures/{bundle.name}/" in index
    # The bearer header keeps working for scripts; a session never lets anyone post alerts.
    assert running.request("GET", draft)[0] == 200
    post = fetch(running.url, "POST", "/alertmanager", json.dumps(payload("alertmanager-xid-firing.json")).encode(),
                 {"Cookie": session, "Content-Type": "application/json"})  # fmt: skip
    assert post[0] == 401
    # A tampered or foreign cookie is no session.
    name, value = session.split("=", 1)
    forged = value[:-1] + ("0" if value[-1] != "0" else "1")
    assert fetch(running.url, path="/", headers={"Cookie": f"{name}={forged}"})[0] == 401
    assert fetch(running.url, path="/", headers={"Cookie": f"{name}={auth.new_session('other', 60)}"})[0] == 401
    # Log out clears the cookie.
    status, headers, _ = fetch(running.url, "POST", "/logout", b"", {"Cookie": session})
    assert status == 303 and "Max-Age=0" in headers["set-cookie"]


def test_sessions_expire_and_next_stays_on_this_server() -> None:
    value = auth.new_session("tok", 3600, now=1000.0)
    assert auth.session_ok(value, "tok", now=1000.0 + 3599)
    assert not auth.session_ok(value, "tok", now=1000.0 + 3601)
    assert not auth.session_ok(value, "other-token", now=1000.0)
    expires, nonce, sig = value.split(".")
    assert not auth.session_ok(f"{int(expires) + 86400}.{nonce}.{sig}", "tok", now=1000.0)  # a longer life is forged
    for hostile in ("//evil.example/", "https://evil.example/", "/\\evil.example", "javascript:alert(1)", "/a\nb"):
        assert auth.safe_next(hostile) == "/"
    assert auth.safe_next("/captures/x/postmortem.html") == "/captures/x/postmortem.html"


def test_raw_files_are_served_read_only_and_only_from_the_bundle(serve: Any, tmp_path: Path) -> None:  # noqa: F811
    running, bundle = captured(serve, tmp_path)
    base = f"/captures/{bundle.name}"
    kernel = next(p for p in bundle.rglob("kernel-log*.out"))
    rel = kernel.relative_to(bundle).as_posix()
    status, body = running.request("GET", f"{base}/{rel}")
    assert status == 200 and body == kernel.read_text()
    status, listing = running.request("GET", f"{base}/")
    assert status == 200 and f'<a href="{base}/{rel}">{rel}</a>' in listing
    # The draft links each raw file by its path relative to the bundle: the same link works when served.
    status, html = running.request("GET", f"{base}/postmortem.html")
    assert f'<a href="{rel}"><code>{rel}</code></a>' in html
    secret = tmp_path / "outside.txt"
    secret.write_text("not evidence")
    (bundle / "hosts" / "link-out").symlink_to(secret)
    (bundle / ".hidden").write_text("x")
    for bad in (
        f"{base}/../captures.jsonl",
        f"{base}/..%2Fcaptures.jsonl",
        f"{base}/hosts/..%2F..%2F..%2Foutside.txt",
        f"{base}/%2E%2E/%2E%2E/outside.txt",
        f"{base}/hosts/link-out",
        f"{base}/.hidden",
        f"{base}//etc/passwd",
        f"{base}/{rel}%00.txt",
        "/captures/../outside.txt",
    ):
        status, body = running.request("GET", bad)
        assert status == 404 and "not evidence" not in str(body), bad
    assert running.request("POST", f"{base}/{rel}", b"x")[0] == 404  # read-only: nothing is written


@pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (Debian package `chromium`)")
def test_headless_chromium_logs_in_and_opens_a_draft(serve: Any, tmp_path: Path) -> None:  # noqa: F811
    running, bundle = captured(serve, tmp_path)
    draft = f"/captures/{bundle.name}/postmortem.html"
    with DevTools(tmp_path / "profile") as browser:
        browser.goto(f"{running.url}{draft}")  # no session yet: the login page
        assert browser.eval("location.pathname") == "/login"
        browser.eval(f"document.querySelector('input[name=token]').value = {json.dumps(TOKEN)}")
        browser.submit("document.forms[0].submit()")
        assert browser.eval("location.pathname") == draft
        assert "gpu-fell-off-bus" in browser.eval("document.body.innerText")
        cookies = browser.call("Network.getCookies", {"urls": [running.url]})["cookies"]
        (session,) = [c for c in cookies if c["name"] == auth.COOKIE]
        assert session["httpOnly"] and session["sameSite"] == "Strict"
        assert browser.eval("document.cookie") == ""  # HttpOnly: no script on the page can read it
        shot = tmp_path / "draft.png"
        shot.write_bytes(base64.b64decode(browser.call("Page.captureScreenshot", {"format": "png"})["data"]))
        browser.goto(f"{running.url}/")
        assert "critical" in browser.eval("document.querySelector('tr.sev-critical').innerText")
        colour = browser.eval(
            "getComputedStyle(document.querySelector('tr.sev-critical td:nth-child(7)')).backgroundColor"
        )
        assert colour == "rgb(217, 48, 37)"
        (tmp_path / "index.png").write_bytes(
            base64.b64decode(browser.call("Page.captureScreenshot", {"format": "png"})["data"])
        )
    from tests.postmortem.test_html_chromium import read_png

    width, height, rows, step = read_png(shot)
    white = sum(1 for row in rows[::20] for x in range(0, len(row), step * 20) if row[x : x + 3] == b"\xff\xff\xff")
    assert width >= 800 and white > 0.3 * (height // 20) * (width // 20)  # a page, not a blank or black screen
    if os.environ.get("NIGHTOWL_KEEP_SCREENSHOTS"):
        keep = Path(os.environ["NIGHTOWL_KEEP_SCREENSHOTS"])
        keep.mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, keep / "serve-draft.png")
        shutil.copy(tmp_path / "index.png", keep / "serve-index.png")


class DevTools:
    """Headless Chromium driven over the DevTools protocol on a pipe (fds 3 and 4, NUL-framed JSON).

    https://chromedevtools.github.io/devtools-protocol/ ; ``--remote-debugging-pipe`` needs no port.
    """

    def __init__(self, profile: Path) -> None:
        self.profile = profile
        self.next_id = 0
        self.session: str | None = None
        self.buffer = b""
        self.events: list[dict[str, Any]] = []

    def __enter__(self) -> DevTools:
        import fcntl

        def high(fd: int) -> int:  # above 4, so placing the ends at 3 and 4 cannot overwrite one with the other
            moved = fcntl.fcntl(fd, fcntl.F_DUPFD, 10)
            os.close(fd)
            return moved

        to_browser_r, self.to_browser = os.pipe()
        self.from_browser, from_browser_w = os.pipe()
        to_browser_r, from_browser_w = high(to_browser_r), high(from_browser_w)
        args = [
            *("--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--remote-debugging-pipe"),
            *(f"--user-data-dir={self.profile}", "--window-size=1200,900", "--no-first-run", "about:blank"),
        ]
        # The protocol pipe must be fds 3 (commands in) and 4 (replies out) in Chromium: a tiny exec places them.
        place = (
            "import os, sys; os.dup2(int(sys.argv[1]), 3); os.dup2(int(sys.argv[2]), 4); "
            "os.execv(sys.argv[3], sys.argv[3:])"
        )
        self.proc = subprocess.Popen(
            [sys.executable, "-c", place, str(to_browser_r), str(from_browser_w), str(CHROMIUM), *args],
            pass_fds=(to_browser_r, from_browser_w),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(to_browser_r)
        os.close(from_browser_w)
        target = self.call("Target.createTarget", {"url": "about:blank"}, top=True)["targetId"]
        self.session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True}, top=True)["sessionId"]
        self.call("Page.enable")
        self.call("Network.enable")
        return self

    def __exit__(self, *exc: object) -> None:
        self.proc.kill()
        self.proc.wait(10)
        os.close(self.to_browser)
        os.close(self.from_browser)

    def _read(self) -> dict[str, Any]:
        import select

        while b"\0" not in self.buffer:
            ready, _, _ = select.select([self.from_browser], [], [], 60)
            assert ready, "chromium did not answer within 60 s"
            chunk = os.read(self.from_browser, 1 << 20)
            assert chunk, "chromium closed the pipe"
            self.buffer += chunk
        message, _, self.buffer = self.buffer.partition(b"\0")
        return dict(json.loads(message))

    def call(self, method: str, params: dict[str, Any] | None = None, top: bool = False) -> dict[str, Any]:
        self.next_id += 1
        message: dict[str, Any] = {"id": self.next_id, "method": method, "params": params or {}}
        if not top:
            message["sessionId"] = self.session
        os.write(self.to_browser, json.dumps(message).encode() + b"\0")
        while True:
            reply = self._read()
            if reply.get("id") == self.next_id:
                assert "error" not in reply, reply
                return dict(reply.get("result") or {})
            self.events.append(reply)

    def wait_event(self, method: str) -> None:
        while True:
            for index, event in enumerate(self.events):
                if event.get("method") == method:
                    del self.events[: index + 1]
                    return
            self.events.append(self._read())

    def goto(self, url: str) -> None:
        self.events.clear()
        self.call("Page.navigate", {"url": url})
        self.wait_event("Page.loadEventFired")

    def submit(self, script: str) -> None:
        self.events.clear()
        self.eval(script)
        self.wait_event("Page.loadEventFired")

    def eval(self, expression: str) -> Any:
        return self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True})["result"].get("value")
