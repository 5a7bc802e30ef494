"""Parse once for the typed readers (issue 44 item 4): history's port and fabric rows come from what the run
parsed of an output it stored scrubbed, rebuilt from its JSON (collectors/jsonable.py), not from a parse of the
scrubbed text, which can read differently."""

from __future__ import annotations

import glob
from pathlib import Path

import pytest

from nightowl.collectors.base import to_jsonable
from nightowl.collectors.gpu import fabric
from nightowl.collectors.jsonable import from_jsonable
from nightowl.collectors.network import ib_ports
from nightowl.engine.parse_memo import ParsedOutputs
from nightowl.history.extract import network_rows

ROOT = Path(__file__).resolve().parents[2]

PORT = "CA 'mlx5_{n}'\n\tCA type: MT4129\n\tNumber of ports: 1\n\tPort 1:\n\t\tState: {state}\n\t\tPhysical state: {phys}\n"  # noqa: E501
RUN_READ = PORT.format(n=0, state="Active", phys="LinkUp") + PORT.format(n=1, state="Initializing", phys="LinkUp")
# As stored: a scrub that changed the text so that it no longer reads the same (here: the second CA's block gone).
STORED = PORT.format(n=0, state="Active", phys="LinkUp") + "CA '[REDACTED]'\n"


def test_port_rows_are_of_what_the_run_parsed_not_of_the_scrubbed_copy(tmp_path: Path) -> None:
    kept = ParsedOutputs({"ib-ports"}, to_json=to_jsonable)
    kept.scrub_json = lambda value: value
    kept.parse_and_keep("ib-ports", ib_ports.parse, RUN_READ)
    kept.alias([RUN_READ], [STORED], "hosts/h/ib-ports.1.out", "ib-ports")
    (tmp_path / "ib-ports.1.out").write_text(STORED)
    rows = network_rows(tmp_path, "h", None, kept=kept)
    assert [row["kind"] for row in rows] == ["nic_port_down"], rows
    assert network_rows(tmp_path, "h", None) == []  # no kept parse: the stored copy is all there is


@pytest.mark.parametrize(
    ("kind", "module", "result", "pattern"),
    [
        ("fabric", fabric, fabric.FabricResult, "fixtures/hosts/*/fabric*.out"),
        ("ib-ports", ib_ports, ib_ports.IbPortsResult, "fixtures/hosts/*/ib-ports*.out"),
    ],
)
def test_every_recorded_output_comes_back_from_its_json_alike(kind: str, module, result, pattern: str) -> None:  # type: ignore[no-untyped-def]
    files = sorted(glob.glob(str(ROOT / pattern)))
    assert files, pattern
    for name in files:
        parsed = module.parse(Path(name).read_text())
        back = from_jsonable(result, {**to_jsonable(parsed), "coverage": {}, "normalised": []})
        assert back == parsed and module.facts(back) == module.facts(parsed), name


def test_json_of_another_shape_is_refused() -> None:
    with pytest.raises(TypeError):
        from_jsonable(ib_ports.IbPortsResult, {"kind": "ib-ports", "warnings": [], "ports": {"not": "a list"}})
