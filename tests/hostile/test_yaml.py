"""Issue 14 item 2: YAML alias bombs are refused before the tree is built or walked, in runbooks,
inventories and a bundle's runbook.yaml; a non-UTF-8 or binary runbook is exit 2, not a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from nightowl.cli.main import main as cli
from nightowl.engine.yaml_lines import YamlError, load_with_lines
from nightowl.fleet.inventory import InventoryError, load_inventory
from tests.hostile.watchdog import watchdog

# "Billion laughs": 9 levels of 9 aliases, ~400 bytes standing for 9**9 strings.
BOMB = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n' + "".join(
    f"{c}: &{c} [{', '.join(['*' + p] * 9)}]\n" for p, c in zip("abcdefgh", "bcdefghi", strict=True)
)


def test_alias_bomb_is_refused_with_its_line() -> None:
    with watchdog(), pytest.raises(YamlError, match="expand to more than") as caught:
        load_with_lines(BOMB)
    assert caught.value.line is not None and caught.value.line > 1


def test_recursive_alias_is_refused() -> None:
    with pytest.raises(YamlError, match="recursive"):
        load_with_lines("a: &x [1, *x]\n")


def test_deep_nesting_is_an_error_not_a_crash() -> None:
    with pytest.raises(YamlError):
        load_with_lines("x: " + "[" * 50_000 + "]" * 50_000)


def test_ordinary_aliases_still_load() -> None:
    data, _lines = load_with_lines("base: &b {timeout: 5}\nuse: *b\nmerged:\n  <<: *b\n  x: 1\n")
    assert data["use"] == {"timeout": 5} and data["merged"] == {"timeout": 5, "x": 1}


def test_runbook_alias_bomb_is_exit_2(tmp_path: Path) -> None:
    path = tmp_path / "bomb.yaml"
    path.write_text("id: bomb\n" + BOMB)
    with watchdog():
        result = CliRunner().invoke(cli, ["runbook", "validate", str(path)])
    assert result.exit_code == 2
    assert f"{path}:" in result.output and "expand to more than" in result.output


@pytest.mark.parametrize("content", [b"id: x\ntitle: \xff\xfe caf\xe9\n", b"\x7fELF\x02\x01\x01\x00\x00" * 40])
def test_binary_runbook_is_exit_2_naming_the_file(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "rb.yaml"
    path.write_bytes(content)
    result = CliRunner().invoke(cli, ["runbook", "validate", str(path)])
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert str(path) in result.output


def test_inventory_alias_bomb_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "inventory.yaml"
    path.write_text(BOMB)
    with watchdog(), pytest.raises(InventoryError, match="expand to more than"):
        load_inventory(path)


def test_bundle_runbook_alias_bomb_does_not_hang_postmortem(tmp_path: Path) -> None:
    from tests.postmortem.bundles import make_bundle

    bundle = make_bundle(tmp_path, ["xid79-fallen-off-bus"])
    (bundle / "runbook.yaml").write_text(BOMB)
    with watchdog():
        result = CliRunner().invoke(cli, ["postmortem", str(bundle)])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
