"""Just enough PNG decoding for the browser tests to look at a screenshot's pixels
(Chromium writes 8-bit, non-interlaced RGB or RGBA): no imaging library is needed for
that, and none is a dependency of the project."""
from __future__ import annotations

import struct
import zlib

_CHANNELS = {2: 3, 6: 4}  # colour type -> bytes per pixel (RGB, RGBA)


def pixels(png: bytes) -> tuple[int, int, list[bytes]]:
    """(width, height, rows): each row the pixels' bytes, 3 or 4 a pixel (see channels)."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, data, header = 8, b"", None
    while pos < len(png):
        length, kind = struct.unpack(">I4s", png[pos:pos + 8])
        chunk = png[pos + 8:pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", chunk)
        elif kind == b"IDAT":
            data += chunk
        elif kind == b"IEND":
            break
    width, height, depth, colour, _, _, interlace = header
    assert depth == 8 and colour in _CHANNELS and not interlace, header
    bpp = _CHANNELS[colour]
    raw = zlib.decompress(data)
    stride = width * bpp
    rows, prev = [], bytes(stride)
    for y in range(height):
        line = raw[y * (stride + 1):(y + 1) * (stride + 1)]
        kind, cur = line[0], bytearray(line[1:])
        for i in range(stride):
            left = cur[i - bpp] if i >= bpp else 0
            up = prev[i]
            corner = prev[i - bpp] if i >= bpp else 0
            if kind == 1:
                cur[i] = (cur[i] + left) & 0xFF
            elif kind == 2:
                cur[i] = (cur[i] + up) & 0xFF
            elif kind == 3:
                cur[i] = (cur[i] + (left + up) // 2) & 0xFF
            elif kind == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                pred = left if pa <= pb and pa <= pc else up if pb <= pc else corner
                cur[i] = (cur[i] + pred) & 0xFF
        rows.append(bytes(cur))
        prev = cur
    return width, height, [bytes(r) for r in rows]


def ink(png: bytes, threshold: int = 128) -> frozenset[tuple[int, int]]:
    """The dark pixels of an image (any channel's mean below `threshold`): its glyphs'
    shape on a light background, as a set of (x, y)."""
    width, height, rows = pixels(png)
    bpp = len(rows[0]) // width if rows else 3
    out = set()
    for y, row in enumerate(rows):
        for x in range(width):
            r, g, b = row[x * bpp:x * bpp + 3]
            if (r + g + b) / 3 < threshold:
                out.add((x, y))
    return frozenset(out)
