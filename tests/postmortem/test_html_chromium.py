"""The HTML draft opened in headless Chromium (Debian package `chromium`): the graph is really drawn."""

from __future__ import annotations

import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import pytest

from nightowl.postmortem import render_bundle
from nightowl.postmortem.svg import TAKEN_FILL
from tests.postmortem.bundles import make_bundle

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
WIDTH, HEIGHT = 1000, 3000


def read_png(path: Path) -> tuple[int, int, list[bytes], int]:
    """(width, height, rows of RGB(A) bytes, bytes per pixel) of an 8-bit non-interlaced PNG, filters undone."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, chunks, header = 8, [], b""
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos : pos + 8])
        body = data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            header = body
        elif kind == b"IDAT":
            chunks.append(body)
        pos += 12 + length
    width, height, depth, color = struct.unpack(">IIBB", header[:10])
    assert depth == 8 and color in (2, 6)
    step = 3 if color == 2 else 4
    raw = zlib.decompress(b"".join(chunks))
    stride = width * step
    rows, previous = [], bytearray(stride)
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        for x in range(stride):
            left = line[x - step] if x >= step else 0
            up, corner = previous[x], previous[x - step] if x >= step else 0
            if kind == 1:
                line[x] = (line[x] + left) & 255
            elif kind == 2:
                line[x] = (line[x] + up) & 255
            elif kind == 3:
                line[x] = (line[x] + (left + up) // 2) & 255
            elif kind == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                line[x] = (line[x] + (left if pa <= pb and pa <= pc else up if pb <= pc else corner)) & 255
        rows.append(bytes(line))
        previous = line
    return width, height, rows, step


@pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (Debian package `chromium`)")
def test_headless_chromium_renders_the_highlighted_graph(tmp_path: Path) -> None:
    bundle = make_bundle(tmp_path / "b", ["xid79-fallen-off-bus"])
    page = tmp_path / "draft.html"
    html = render_bundle(bundle, fmt="html")
    # The graph sits under Supporting information, below the SRE template's sections: the shot starts there.
    head, rest = html.split("<h2>Summary</h2>", 1)
    page.write_text(head + '<h3 id="decision-path">' + rest.split('<h3 id="decision-path">', 1)[1])
    shot = tmp_path / "shot.png"
    subprocess.run(
        [
            str(CHROMIUM),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            f"--window-size={WIDTH},{HEIGHT}",
            f"--screenshot={shot}",
            page.as_uri(),
        ],
        capture_output=True,
        timeout=90,
        check=False,
    )
    assert shot.exists(), "chromium wrote no screenshot"
    width, height, rows, step = read_png(shot)
    assert (width, height) == (WIDTH, HEIGHT)
    amber = bytes.fromhex(TAKEN_FILL[1:])
    amber_pixels = sum(1 for row in rows for x in range(0, len(row), step) if row[x : x + 3] == amber)
    # Three taken nodes of 190x46 px each, filled amber (the tag pills add a little more).
    assert amber_pixels > 3 * 150 * 30
    white = sum(1 for row in rows[::50] for x in range(0, len(row), step * 50) if row[x : x + 3] == b"\xff\xff\xff")
    assert white > 0.3 * (height // 50) * (width // 50)  # a page, not a blank or black screen
