"""Shared test helpers: pyinfra-style cases (one JSON file per captured output)."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CASES = ROOT / "tests" / "collectors" / "cases"


def load_cases(kind: str) -> list[tuple[str, dict[str, Any]]]:
    """Cases of one parse kind: tests/collectors/cases/<kind>/<case>.json.

    Each case is {"input": "<path relative to repo root>", "expected": {...}}; ``expected``
    is a subset of the parse result, written by reading the sample, not by running the parser.
    """
    folder = CASES / kind
    return [(p.stem, json.loads(p.read_text())) for p in sorted(folder.glob("*.json"))]


def assert_subset(actual: Any, expected: Any, where: str = "$") -> None:
    """Every key/value in ``expected`` is present and equal in ``actual``.

    Lists compare element-wise with the same length unless ``expected`` is a dict
    {"__len__": n, "__items__": {index: subset}} for long lists.
    """
    if isinstance(expected, dict) and "__len__" in expected:
        assert isinstance(actual, list), f"{where}: expected list, got {type(actual).__name__}"
        assert len(actual) == expected["__len__"], f"{where}: length {len(actual)} != {expected['__len__']}"
        for index, sub in expected.get("__items__", {}).items():
            assert_subset(actual[int(index)], sub, f"{where}[{index}]")
        return
    if isinstance(expected, dict):
        assert isinstance(actual, dict), f"{where}: expected object, got {actual!r}"
        for key, sub in expected.items():
            assert key in actual, f"{where}: missing key {key!r}"
            assert_subset(actual[key], sub, f"{where}.{key}")
        return
    if isinstance(expected, list):
        assert isinstance(actual, list), f"{where}: expected list, got {actual!r}"
        assert len(actual) == len(expected), f"{where}: length {len(actual)} != {len(expected)}: {actual!r}"
        for index, (a, e) in enumerate(zip(actual, expected, strict=True)):
            assert_subset(a, e, f"{where}[{index}]")
        return
    if isinstance(expected, float) and isinstance(actual, (int, float)):
        assert abs(actual - expected) <= 1e-6 * max(1.0, abs(expected)), f"{where}: {actual!r} != {expected!r}"
        return
    assert actual == expected, f"{where}: {actual!r} != {expected!r}"


def load_script(name: str) -> Any:
    """A script of scripts/ (no .py suffix) imported as a module, so a test calls its functions."""
    import importlib.machinery
    import importlib.util

    path = ROOT / "scripts" / name
    module_name = name.replace("-", "_")
    loader = importlib.machinery.SourceFileLoader(module_name, str(path))
    spec = importlib.util.spec_from_loader(module_name, loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def facts_of(kind: str, text: str) -> dict[str, Any]:
    """The facts the ``kind`` collector states about ``text``: its parse, then its facts, as a run does."""
    from nightowl.collectors import get_collector

    collector = get_collector(kind)
    facts: dict[str, Any] = collector.facts(collector.parse(text))
    return facts


@contextlib.contextmanager
def loopback_http(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """A threaded HTTP server on a free loopback port answering with ``handler``: its base URL (no trailing
    slash), shut down and closed on exit."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def replayed_action(
    tmp_path: Path, runbook: str, files: dict[str, str], base: str | None = None, params: tuple[str, ...] = ()
) -> str:
    """The first action ``runbook`` gives a recorded host (``fixtures/hosts/<base>`` copied, or an empty folder)
    with ``files`` (name -> text) written into it, as `triage --replay` does; "cannot-judge" with no verdict. A
    job runbook's (nccl-hang) verdict is the job's."""
    import shutil
    import tempfile

    from click.testing import CliRunner

    from nightowl.cli.main import main

    work = Path(tempfile.mkdtemp(dir=tmp_path))
    host = work / "host"
    if base:
        shutil.copytree(ROOT / "fixtures" / "hosts" / base, host)
    else:
        host.mkdir()
    for name, text in files.items():
        (host / name).write_text(text)
    args = ["triage", runbook, "--replay", str(host), *params, "--format", "json", "--out", str(work / "out")]
    summary = json.loads(CliRunner().invoke(main, args).output)
    verdict = summary.get("verdict") or summary["hosts"][0].get("verdict")
    return str((verdict or {}).get("action", "cannot-judge"))
