"""Terminal escapes are stripped before every parser: raw ESC, caret notation ``^[[``, rsyslog ``#033[``."""

from __future__ import annotations

import json

import pytest

from nightowl.collectors import MODULES, get_collector
from nightowl.collectors.base import to_jsonable
from nightowl.collectors.escapes import strip_escapes
from tests.helpers import ROOT, load_cases

FORMS = {
    "raw": ("\x1b[1;31m", "\x1b[0m"),
    "caret": ("^[[0;36m", "^[[0m"),
    "rsyslog": ("#033[4m", "#033[0m"),
}


def _colour_every_line(text: str, form: str) -> str:
    start, end = FORMS[form]
    return "\n".join(f"{start}{line}{end}" if line.strip() else line for line in text.split("\n"))


def test_each_form_and_only_sequences() -> None:
    assert strip_escapes("\x1b[4m        GPU0\x1b[0m\tGPU1") == "        GPU0\tGPU1"
    assert strip_escapes("^[[0;36m(VllmWorker rank=0)^[[0;0m INFO") == "(VllmWorker rank=0) INFO"
    assert strip_escapes("kernel: #033[1;31mNVRM: Xid#033[0m") == "kernel: NVRM: Xid"
    assert strip_escapes("\x1b]0;user@gpu-17\x07prompt") == "prompt"  # OSC window title
    assert strip_escapes("\x1b(B\x1b[mplain") == "plain"  # tput sgr0
    # text that starts no sequence stays: a caret, an rsyslog newline escape, a hash
    assert strip_escapes("a ^[ b #033 c #012NVRM: d") == "a ^[ b #033 c #012NVRM: d"
    assert strip_escapes("plain") == "plain"


# One case per text-reading kind (its first case with an input file); derived kinds read no file.
PARSE_KINDS = sorted(kind for kind in MODULES if not getattr(get_collector(kind), "inputs", None))
SAMPLES = [
    (kind, case["input"])
    for kind in PARSE_KINDS
    for _, case in load_cases(kind)[:1]
    if (ROOT / case["input"]).is_file()
]


@pytest.mark.parametrize("form", sorted(FORMS))
@pytest.mark.parametrize(("kind", "path"), SAMPLES, ids=[kind for kind, _ in SAMPLES])
def test_every_collector_parses_coloured_output_as_plain(kind: str, path: str, form: str) -> None:
    collector = get_collector(kind)
    text = (ROOT / path).read_text()
    plain = json.dumps(to_jsonable(collector.parse(text)), sort_keys=True, default=str)
    coloured = json.dumps(to_jsonable(collector.parse(_colour_every_line(text, form))), sort_keys=True, default=str)
    assert coloured == plain


def test_topo_header_underlined_on_a_tty() -> None:
    """``nvidia-smi topo -m`` on a TTY underlines its header row (raw ESC [4m ... ESC [0m)."""
    collector = get_collector("gpu-topology")
    text = (ROOT / "fixtures/corpus/gpu/topo-m-dgx-a100-nv12-10nic-dcgm149.txt").read_text()
    lines = text.split("\n")
    header = next(i for i, line in enumerate(lines) if "GPU0" in line)
    lines[header] = "\x1b[4m" + lines[header] + "\x1b[0m"
    assert to_jsonable(collector.parse("\n".join(lines))) == to_jsonable(collector.parse(text))


def test_xid_command_reads_caret_coloured_lines(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from click.testing import CliRunner

    from nightowl.cli.main import main

    log = tmp_path / "dmesg.txt"
    log.write_text(
        "[  12.3] ^[[1;31mNVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the bus.^[[0m\n"
    )
    result = CliRunner().invoke(main, ["xid", str(log)])
    assert result.exit_code in (0, 1), result.output
    assert "XID 79" in result.output and "^[" not in result.output
