"""engine/runbook_data.py's plain twins hold exactly the schema's fields, and every built-in runbook as
data walks like the validated model (kind, targets, every value)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from nightowl.engine import model
from nightowl.engine.runbook_data import TWINS, RunbookData, as_data, split_entry
from nightowl.engine.validate import load_runbook
from nightowl.library import runbooks


@pytest.mark.parametrize("name", sorted(TWINS))
def test_each_twin_has_exactly_its_models_fields(name: str) -> None:
    schema = getattr(model, name)
    twin = TWINS[name]
    assert {f.name for f in dataclasses.fields(twin)} == set(schema.model_fields)
    for f in dataclasses.fields(twin):
        info = schema.model_fields[f.name]
        if info.is_required():
            assert f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING, (name, f.name)
        elif info.default_factory is not None:
            assert f.default_factory is not dataclasses.MISSING and f.default_factory() == info.default_factory()
        else:
            assert f.default == info.default, (name, f.name)


def _same(validated: Any, data: Any) -> None:
    """Every field of a model equals its twin's, recursively."""
    if hasattr(type(validated), "model_fields"):
        assert type(data) is TWINS[type(validated).__name__]
        for name in type(validated).model_fields:
            _same(getattr(validated, name), getattr(data, name))
    elif isinstance(validated, dict):
        assert list(validated) == list(data)
        for key in validated:
            _same(validated[key], data[key])
    elif isinstance(validated, list):
        assert len(validated) == len(data)
        for a, b in zip(validated, data, strict=True):
            _same(a, b)
    else:
        assert validated == data and type(validated) is type(data)


@pytest.mark.parametrize("name", sorted(runbooks.builtin_paths()))
def test_every_builtin_runbook_as_data_is_the_validated_model(name: str) -> None:
    validated = load_runbook(runbooks.builtin_paths()[name]).runbook
    data = as_data(validated)
    assert isinstance(data, RunbookData)
    _same(validated, data)
    for node_id, node in validated.nodes.items():
        assert data.nodes[node_id].kind == node.kind
        assert data.nodes[node_id].targets() == node.targets()


def test_loading_by_name_gives_the_data_copy() -> None:
    assert isinstance(runbooks.load("xid").runbook, RunbookData)


def test_split_entry_is_the_one_the_schema_uses() -> None:
    assert model.split_entry is split_entry
    assert split_entry("metrics:after") == ("metrics", "metrics_after")
    assert split_entry("kernel-log") == ("kernel-log", "kernel_log")
