"""scripts/mutate imports a mutated module afresh with what depends on it. A package imported afresh must come
with its submodules, and the parent it hangs from must not keep handing out the old one: otherwise a test's
``from pkg import sub`` reads the old package beside a fresh ``pkg.rules`` and the unchanged tree fails (the
tests of collectors/gpu/xid_catalog/rules.py did)."""

from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def mutate() -> Any:
    spec = importlib.util.spec_from_file_location("nightowl_mutate_fresh", ROOT / "scripts" / "mutate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["nightowl_mutate_fresh"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_a_fresh_package_takes_its_submodules(mutate: Any) -> None:
    fresh = mutate._dependents(ROOT, "nightowl.collectors.gpu.xid_catalog.rules")
    assert "nightowl.collectors.gpu.xid_catalog" in fresh  # its __init__ imports rules
    assert "nightowl.collectors.gpu.xid_catalog.catalog" in fresh  # imports no rules, but is the package's
    assert "nightowl.collectors.gpu" not in fresh and "nightowl" not in fresh


def test_an_evicted_module_leaves_its_parents_attribute(mutate: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    parent, child, other = (types.ModuleType(n) for n in ("nomut_pkg", "nomut_pkg.sub", "nomut_pkg.kept"))
    parent.sub = child  # type: ignore[attr-defined]
    parent.kept = other  # type: ignore[attr-defined]
    for module in (parent, child, other):
        monkeypatch.setitem(sys.modules, module.__name__, module)
    ours = {name: module for name, module in sys.modules.items() if name == "tests" or name.startswith("tests.")}
    try:
        mutate._evict({"nomut_pkg.sub"})  # it also forgets the test modules: put back below
    finally:
        sys.modules.update(ours)
    assert "nomut_pkg.sub" not in sys.modules and not hasattr(parent, "sub")
    assert sys.modules["nomut_pkg.kept"] is other and parent.kept is other  # type: ignore[attr-defined]
