"""`nightowl runbook schema`: a JSON Schema that every built-in runbook passes, kept in docs/ up to date."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from click.testing import CliRunner

from nightowl.cli.main import main
from nightowl.library import runbooks

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = ROOT / "docs" / "runbook.schema.json"


def printed_schema() -> dict[str, Any]:
    result = CliRunner().invoke(main, ["runbook", "schema"])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


@pytest.fixture(scope="module")
def validator() -> jsonschema.Draft7Validator:
    schema = printed_schema()
    jsonschema.Draft7Validator.check_schema(schema)  # a schema the draft it declares accepts
    assert schema["$schema"] == "http://json-schema.org/draft-07/schema#"
    return jsonschema.Draft7Validator(schema)


@pytest.mark.parametrize("path", sorted(runbooks.builtin_paths().values()), ids=lambda p: p.stem)
def test_every_builtin_runbook_passes_the_schema(validator: jsonschema.Draft7Validator, path: Path) -> None:
    errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(load(path))]
    assert not errors


def load(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


def broken(change: str) -> dict[str, Any]:
    """The xid runbook with one mistake an author could make."""
    doc = copy.deepcopy(load(runbooks.resolve("xid")))
    node_id, node = next((k, v) for k, v in doc["nodes"].items() if "verdict" in v)
    if change == "unknown key":
        node["colect"] = ["nvidia-smi"]
    elif change == "bad action":
        node["verdict"]["action"] = "reboot-everything"
    elif change == "bad severity":
        node["verdict"]["severity"] = "catastrophic"
    elif change == "no entry":
        del doc["entry"]
    elif change == "decide not a list":
        doc["nodes"]["x"] = {"decide": {"when": "true", "goto": node_id}, "default": node_id}
    return doc


@pytest.mark.parametrize("change", ["unknown key", "bad action", "bad severity", "no entry", "decide not a list"])
def test_the_schema_catches_an_authors_mistakes(validator: jsonschema.Draft7Validator, change: str) -> None:
    assert list(validator.iter_errors(broken(change))), change


def test_the_committed_schema_is_up_to_date() -> None:
    assert json.loads(COMMITTED.read_text()) == printed_schema(), (
        "docs/runbook.schema.json is stale: nightowl runbook schema > docs/runbook.schema.json"
    )


def test_the_docs_page_shows_the_modeline_and_the_vscode_setting() -> None:
    page = (ROOT / "docs" / "runbook-schema.md").read_text()
    assert "# yaml-language-server: $schema=../docs/runbook.schema.json" in page
    settings = json.loads(page.split("```json\n", 1)[1].split("```", 1)[0])
    (schema_path,) = settings["yaml.schemas"]
    assert (ROOT / schema_path).resolve() == COMMITTED.resolve()
    assert "runbooks/*.yaml" in settings["yaml.schemas"][schema_path]
