"""parse_lines tests a line for NIC link hints only once it holds "ink ": every hint of nic_links.HINTS
holds it, so a quiet line pays one substring test for them, not one per hint."""

from __future__ import annotations

import inspect

from nightowl.collectors.gpu.kernel_log import parser
from nightowl.collectors.network import nic_links


def test_every_link_hint_holds_the_guard() -> None:
    assert all("ink " in hint for hint in nic_links.HINTS)
    loop = inspect.getsource(parser.parse_lines)
    tested = " or ".join(f"{hint!r} in line" for hint in nic_links.HINTS).replace("'", '"')
    assert f'"ink " in line and ({tested})' in loop
