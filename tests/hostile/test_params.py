"""Issue 14 item 9: --param values are strings unless the runbook declares a type; path and URL
parameters are checked so that no parameter makes a collector read or send a local file."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from nightowl.cli.common import parse_params
from nightowl.cli.main import main as cli
from nightowl.library import runbooks


def _resolved(runbook: str, *pairs: str) -> dict:
    return runbooks.load(runbook).resolve_params(parse_params(pairs))


@pytest.mark.parametrize(
    ("runbook", "pair", "name", "expected"),
    [
        ("xid", "since=10:00", "since", "10:00"),  # YAML would make it 600 (sexagesimal)
        ("engine-start", "container=0755", "container", "0755"),  # YAML would make it 493 (octal)
        (
            "silent-corruption",
            'probe_body={"prompt": "2+2=", "max_tokens": 4}',
            "probe_body",
            '{"prompt": "2+2=", "max_tokens": 4}',
        ),  # kept as the JSON text, not a Python repr
        ("xid", "since=@x", "since", "@x"),  # a string like any other, no traceback
        ("nccl-hang", "gpus_per_node=4", "gpus_per_node", 4),  # integer by its default
        ("nccl-hang", "expect_ib=false", "expect_ib", False),  # boolean by its default
        ("nccl-hang", "busbw_baseline=180.5", "busbw_baseline", 180.5),  # declared number
        ("xid", "expected_gpus=8", "expected_gpus", 8),  # declared integer
        ("xid", "expected_gpus=null", "expected_gpus", None),
    ],
)
def test_values_are_strings_unless_declared(runbook: str, pair: str, name: str, expected: object) -> None:
    assert _resolved(runbook, pair)[name] == expected


@pytest.mark.parametrize(
    ("runbook", "pair"),
    [
        ("silent-corruption", "probe_file=@/etc/shadow"),
        ("silent-corruption", "probe_file=--config=/etc/shadow"),
        ("silent-corruption", "probe_body=@/etc/shadow"),  # curl --data-binary @file
        ("silent-corruption", "endpoint=file:///etc/shadow"),
        ("p99-regression", "metrics_url=file:///etc/shadow"),
        ("p99-regression", "metrics_url=gopher://x/"),
        ("p99-regression", "metrics_url=-K/etc/shadow"),
        ("nccl-hang", "gpus_per_node=eight"),
        ("nccl-hang", "expect_ib=maybe"),
        ("nccl-hang", "busbw_baseline=nan"),
    ],
)
def test_bad_values_are_exit_2_naming_the_parameter(runbook: str, pair: str) -> None:
    name = pair.split("=", 1)[0]
    with pytest.raises(ValueError, match=name):
        _resolved(runbook, pair)
    result = CliRunner().invoke(cli, ["plan", runbook, "--host", "gpu-01", "--param", pair])
    assert result.exit_code == 2, result.output
    assert name in result.output


def test_plan_shows_the_string_as_given() -> None:
    result = CliRunner().invoke(cli, ["plan", "xid", "--host", "gpu-01", "--param", "since=10:00", "--format", "json"])
    assert result.exit_code == 0, result.output
    assert "10:00" in json.dumps(json.loads(result.output))


# --- issue 30, item 16: a URL inside a yaml or json value is checked as a `url` parameter is ---------
@pytest.mark.parametrize(
    "pair",
    [
        "base_url={r1: file:///etc/shadow}",
        "base_url={r1: http://10.0.0.5:8000, r2: 'FILE:///root/.ssh/id_ed25519'}",
        "base_url={r1: [gopher://x/]}",
        "base_url=file:///etc/shadow",
        "base_url={r1: 'data:text/plain,hello'}",
    ],
)
def test_a_url_inside_a_yaml_value_is_checked(pair: str) -> None:
    with pytest.raises(ValueError, match="base_url.*expects an http:// or https:// URL"):
        _resolved("first-look", pair)


def test_a_url_inside_json_or_given_as_data_is_checked() -> None:
    from nightowl.engine.params import coerce

    with pytest.raises(ValueError, match=r"p\.a\[1\] expects an http"):
        coerce("p", "json", '{"a": ["http://ok.example/", "file:///etc/passwd"]}')
    with pytest.raises(ValueError, match=r"p\.r1 expects an http"):
        coerce("p", "yaml", {"r1": "file:///etc/passwd"})  # from a serve rule's params, as data
    assert coerce("p", "yaml", "{r1: 'http://10.0.0.5:8000', r2: 'gpu-17:8000', note: 'a: b'}")["r1"]


def test_a_file_url_in_base_url_is_exit_2_from_the_cli(tmp_path: object) -> None:
    result = CliRunner().invoke(
        cli, ["plan", "first-look", "--host", "r1", "--param", "base_url={r1: file:///etc/shadow}"]
    )
    assert result.exit_code == 2 and "base_url" in result.output
