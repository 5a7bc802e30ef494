"""nightowl/transports/http.py: the serving collectors' curl commands answered in-process read the same
as curl's own output (so --replica and --host reach the same verdicts), and a hung stream ends at the
command's deadline with what came, as curl's --max-time ends it."""

from __future__ import annotations

import contextlib
import shutil
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from nightowl.collectors.serving import replica_health, replica_metrics, stream_probe
from nightowl.engine.runner import resolve_argv
from nightowl.transports.http import HttpTransport
from nightowl.transports.local import LocalTransport
from tests.runbooks.firstlook_standins import Replica, replicas


def _argv(collector: object, url: str) -> tuple[str, ...]:
    params = {"base_url": url, "stream_body": '{"prompt": "ping", "max_tokens": 1, "stream": true}'}
    argv = resolve_argv(collector.COMMANDS[0], params)  # type: ignore[attr-defined]
    assert argv is not None
    return argv


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
@pytest.mark.parametrize("status", [200, 503])
def test_health_reads_the_same_as_curls_own_output(status: int) -> None:
    specs = {"r1": Replica(health_status=status)}
    with replicas(specs):
        argv = _argv(replica_health, specs["r1"].url)
        ours = HttpTransport("r1", specs["r1"].url).run(argv, 10, kind="replica-health")
        theirs = LocalTransport("r1").run(argv, 10, kind="replica-health")
    assert ours.rc == theirs.rc == 0
    mine, curls = (replica_health.facts(replica_health.parse(r.stdout)) for r in (ours, theirs))
    for key in ("alive", "health_status", "answered", "version"):
        assert mine[key] == curls[key], key
    assert mine["alive"] is (status == 200)
    # the Date header both ways: the replica's clock, within the second it answered
    assert mine["server_time"] is not None and abs(mine["server_time"] - time.time()) < 5
    assert curls["server_time"] is not None and abs(mine["server_time"] - curls["server_time"]) < 5


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
def test_metrics_fail_on_http_error_as_curl_does() -> None:
    specs = {"r1": Replica(metrics_status=502)}
    with replicas(specs):
        argv = _argv(replica_metrics, specs["r1"].url)
        ours = HttpTransport("r1", specs["r1"].url).run(argv, 10, kind="replica-metrics")
        theirs = LocalTransport("r1").run(argv, 10, kind="replica-metrics")
    assert ours.rc == theirs.rc == 22 and ours.stdout == theirs.stdout == ""


def test_refused_connection_is_status_000_and_exit_7() -> None:
    with socket.socket() as sock:  # a port nothing listens on: bound, never listening
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        result = HttpTransport("r1", url).run(_argv(replica_health, url), 10, kind="replica-health")
    facts = replica_health.facts(replica_health.parse(result.stdout))
    assert result.rc == 7 and facts["alive"] is False and facts["answered"] is False


@contextmanager
def _hung_stream() -> Iterator[str]:
    """A server that sends one SSE chunk and then holds the connection open, sending nothing more."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    stop = threading.Event()

    def serve() -> None:
        conn, _ = server.accept()
        conn.recv(65536)
        chunk = b'data: {"choices": [{"index": 0, "text": " pong", "finish_reason": null}]}\n\n'
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n" + chunk)
        stop.wait(10)
        conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.getsockname()[1]}"
    finally:
        stop.set()
        with contextlib.suppress(OSError):
            server.shutdown(socket.SHUT_RDWR)  # wakes an accept() still waiting (no connection came)
        thread.join(timeout=5)
        server.close()


def test_a_stream_that_hangs_ends_at_the_deadline_with_what_came() -> None:
    with _hung_stream() as url:
        t0 = time.monotonic()
        result = HttpTransport("r1", url).run(_argv(stream_probe, url), 1.5, kind="stream-probe")
        took = time.monotonic() - t0
    assert took < 4  # the command's deadline bounds it, not the server
    probe = stream_probe.facts(stream_probe.parse(result.stdout))
    assert result.rc == 28 and probe["chunks"] == 1 and probe["missing_end"] is True


def test_close_ends_a_read_in_flight() -> None:
    """An interrupt closes the run's transports: a stream being read ends then, not at its deadline."""
    with _hung_stream() as url:
        transport = HttpTransport("r1", url)
        threading.Timer(0.5, transport.close).start()
        t0 = time.monotonic()
        result = transport.run(_argv(stream_probe, url), 20, kind="stream-probe")
        took = time.monotonic() - t0
    assert took < 5 and result.rc != 0
