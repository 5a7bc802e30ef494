"""kernel-log-boots has the node cut each earlier boot's log with awk (``NODE_FILTER``) before sending it:
what nightowl reads of the cut log must be what it reads of the whole one (events, warnings, boots), and
the cut must be small. The real awk runs here (Debian's mawk; POSIX ERE in the C locale)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from bench.real_evidence import cut_on_node as node_filtered
from nightowl.collectors.gpu import kernel_log, kernel_log_boots
from tests.collectors.gpu.test_kernel_log_boots_prefilter import EXTRA_LINES, LIST, LOGS, shuffled_mixture

pytestmark = pytest.mark.skipif(shutil.which("awk") is None, reason="needs awk, as every node has")

ROOT = Path(__file__).resolve().parents[3]
# Lines whose meaning rests on Python's Unicode classes (\s, \d, \w in _AER_DETAIL), which the node's
# C-locale awk has no names for: the cut keeps them all the same.
UNICODE_LINES = (
    "pcieport 0000:00:01.0:\u2003[\u0660] R\u00e9ception",
    "pcieport 0000:00:01.0:\x85[ 5] \u00e9rr",
    "kernel: \u00e9t\u00e9",
    "\u2028",
    "\x1c",
)


def read_boot(log: str) -> dict[str, Any]:
    """What kernel-log-boots reads of one earlier boot whose log is ``log``."""
    parsed = kernel_log_boots.parse(f"{LIST}{kernel_log_boots.MARKER}-1 --\n{log}")
    return {"previous": parsed["previous"], "warnings": parsed["warnings"], "boots": parsed["boots"]}


def test_fixture_logs_read_alike_cut_or_whole() -> None:
    assert len(LOGS) > 20
    differing = []
    for path in LOGS:
        log = path.read_text(errors="replace")
        if read_boot(node_filtered(log)) != read_boot(log):
            differing.append(path.name)
    assert not differing


@pytest.mark.parametrize("seed", range(30))
def test_shuffled_mixtures_read_alike_cut_or_whole(seed: int) -> None:
    """The fixture logs' lines in random runs; not their marker lines, which the script prints between boots
    and journalctl never does (each line it prints starts with a time)."""
    lines = shuffled_mixture(seed, EXTRA_LINES + UNICODE_LINES)
    log = "".join(f"{line}\n" for line in lines if not kernel_log_boots._MARKER_LINE.match(line.strip()))
    assert read_boot(node_filtered(log)) == read_boot(log)


@pytest.mark.parametrize(
    "line",
    [f"kernel: before {hint} after" for hint in kernel_log.EVENT_HINTS]
    + [
        "pcieport 0000:00:01.0:    [ 0] RxErr",
        "pcieport 0000:00:01.0:\t[12] Timeout",
        "nvidia 0000:3b:00.0: device [10de:20b0] error status/mask=00001000/00000000",
        "nvidia 0000:3b:00.0: AER:   Error of this Agent is reported first",
        "pcieport 0000:00:01.0: AER-aware driver",
        "nvidia 0000:3b:00.0: error_detected: frozen",
        "nvidia 0000:3b:00.0:   TLP Header: 40000001 0000000f 90028090 00000000",
        *UNICODE_LINES[:2],
    ],
)
def test_every_line_an_event_or_report_may_need_is_sent(line: str) -> None:
    """Checked one by one, after a first line and between lines the cut drops: each hint of the parser's,
    and each form of AER detail line, reaches nightowl."""
    assert kernel_log.may_continue_report(line) or any(h in line for h in kernel_log.EVENT_HINTS)
    quiet = "kernel: Key type dns_resolver registered"
    sent = node_filtered(f"{quiet}\n{quiet}\n{line}\n{quiet}\n{quiet}\n")
    assert sent == f"{quiet}\n{line}\n{quiet}\n"  # the node's lines end at "\n" alone, as awk reads them


def test_the_first_lines_are_sent_up_to_one_with_a_letter() -> None:
    """A boot of lines the parser skips is still a boot read (not "empty input"), as with the whole log."""
    quiet = "kernel: Key type dns_resolver registered"
    assert node_filtered(f"\n  \n{quiet}\n{quiet}\n").splitlines() == ["", "  ", quiet]
    assert read_boot(node_filtered(f"{quiet}\n{quiet}\n")) == read_boot(f"{quiet}\n{quiet}\n")
    assert read_boot(node_filtered("\n \n")) == read_boot("\n \n")


def test_a_real_size_boot_log_is_cut_to_a_tenth(tmp_path: Path) -> None:
    """The bench's 0.8 MB boot log of a healthy 8-GPU node (no line a health problem): the node sends
    less than a tenth of it, and nightowl reads the same from it."""
    from bench.real_evidence import recorded_host

    log = (recorded_host(tmp_path / "node") / "kernel-log.out").read_text()
    cut = node_filtered(log)
    assert len(log) > 500_000
    assert len(cut) < len(log) / 10
    assert read_boot(cut) == read_boot(log)


def test_the_script_sends_each_boot_cut(tmp_path: Path) -> None:
    """The collector's whole command, run by sh with a journalctl stand-in: the list as it is, each earlier
    boot after its marker and cut, and a boot journalctl cannot show leaves the next boots read."""
    xid_log = next(p for p in LOGS if "Xid" in p.read_text(errors="replace")).read_text(errors="replace")
    quiet = "".join(f"kernel: pci 0000:{n:02x}:00.0: [8086:09a2] type 00 class 0x060400\n" for n in range(200))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (tmp_path / "list").write_text(LIST)
    (tmp_path / "boot-1").write_text(quiet + xid_log)
    (tmp_path / "boot-3").write_text(xid_log)
    journalctl = bin_dir / "journalctl"
    journalctl.write_text(
        "#!/bin/sh\n"
        f'[ "$1" = --list-boots ] && exec cat {tmp_path}/list\n'
        f'f={tmp_path}/boot$3; [ -e "$f" ] || '
        '{ echo "Data from the specified boot ($3) is not available" >&2; exit 1; }\n'
        'exec cat "$f"\n'
    )
    journalctl.chmod(0o755)
    argv = ["sh", "-c", kernel_log_boots.SCRIPT, kernel_log_boots.KIND, "3"]
    env = {"PATH": f"{bin_dir}:{os.environ.get('PATH', '/usr/bin:/bin')}"}
    run = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60, check=False)
    assert run.returncode == 0
    assert "(-2) is not available" in run.stderr
    whole = f"{LIST}{kernel_log_boots.MARKER}-1 --\n{quiet}{xid_log}{kernel_log_boots.MARKER}-2 --\n"
    whole += f"{kernel_log_boots.MARKER}-3 --\n{xid_log}"
    assert len(run.stdout) < len(whole) - len(quiet) / 2
    assert kernel_log_boots.parse(run.stdout) == kernel_log_boots.parse(whole)
    assert kernel_log_boots.parse(run.stdout)["previous"][0]["events"]


def _boots_run(tmp_path: Path, awk: str | None) -> subprocess.CompletedProcess[str]:
    """The collector's command with a journalctl stand-in for one earlier boot, on a PATH whose only other
    tools are cat and ``awk``: a link to the real one, a stand-in that fails, or none at all."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (tmp_path / "list").write_text(LIST)
    (tmp_path / "boot").write_text(LOGS[0].read_text(errors="replace"))
    (bin_dir / "cat").symlink_to(shutil.which("cat") or "/bin/cat")
    if awk == "real":
        (bin_dir / "awk").symlink_to(shutil.which("awk") or "/usr/bin/awk")
    elif awk == "failing":
        (bin_dir / "awk").write_text("#!/bin/sh\necho 'awk: syntax error' >&2\nexit 2\n")
        (bin_dir / "awk").chmod(0o755)
    journalctl = bin_dir / "journalctl"
    journalctl.write_text(f'#!/bin/sh\n[ "$1" = --list-boots ] && exec cat {tmp_path}/list\nexec cat {tmp_path}/boot\n')
    journalctl.chmod(0o755)
    argv = ["/bin/sh", "-c", kernel_log_boots.SCRIPT, kernel_log_boots.KIND, "1"]
    return subprocess.run(argv, capture_output=True, text=True, env={"PATH": str(bin_dir)}, timeout=60, check=False)


@pytest.mark.parametrize("awk", [None, "failing"], ids=["no-awk", "awk-fails"])
def test_a_node_whose_awk_cannot_cut_sends_the_whole_log(tmp_path: Path, awk: str | None) -> None:
    """No awk on the node, or one that cannot run the filter: each earlier boot arrives whole (never cut
    to nothing, which would read as a boot without events), and reads as before."""
    run = _boots_run(tmp_path, awk)
    log = LOGS[0].read_text(errors="replace")
    assert run.returncode == 0
    assert run.stdout == f"{LIST}{kernel_log_boots.MARKER}-1 --\n{log}"


def test_a_node_with_awk_sends_the_cut(tmp_path: Path) -> None:
    run = _boots_run(tmp_path, "real")
    log = LOGS[0].read_text(errors="replace")
    assert len(node_filtered(log)) < len(log) / 2  # so a whole log sent would not pass for the cut
    assert (run.returncode, run.stdout) == (0, f"{LIST}{kernel_log_boots.MARKER}-1 --\n{node_filtered(log)}")


def test_hint_words_are_matched_literally_by_the_node() -> None:
    """A hint holding ERE operators is escaped: awk matches it as the parser's ``in`` does, and nothing else."""
    word = "a.b[c]|d(e)*+?{2}^$\\z"
    pattern = kernel_log_boots._ere_literal(word)
    texts = [f"x {word} y", "x aXb[c]|d(e)*+?{2}^$\\z y", "x a.b y", "x d(e) y"]
    program = f"/{pattern}/ {{ print }}"
    run = subprocess.run(["awk", program], input="\n".join(texts) + "\n", capture_output=True, text=True, check=True)
    assert run.stdout == f"x {word} y\n"


def test_node_words_come_from_the_parser_hints() -> None:
    """Every event hint and AER-detail hint of the parser reaches the node's filter (none copied by hand)."""
    from nightowl.collectors.gpu.kernel_log.patterns import _AER_DETAIL_HINTS

    words = kernel_log_boots.NODE_WORDS.split("|")
    for hint in (*kernel_log.EVENT_HINTS, *_AER_DETAIL_HINTS):
        assert hint == "] " or any(word in hint for word in words), hint
