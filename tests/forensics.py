"""What a store's files hold, read as an attacker with the disk would: raw bytes, and the zlib streams in
them inflated (retrieval records keep their traces compressed, ``storage.rows.with_trace``)."""

from __future__ import annotations

import contextlib
import zlib
from pathlib import Path
from typing import Any

from storage.rows import trace_of_row

ZLIB_HEADERS = (b"\x78\x01", b"\x78\x5e", b"\x78\x9c", b"\x78\xda")


def readable(data: bytes) -> bytes:
    """``data`` followed by every zlib stream found in it, inflated."""
    parts = [data]
    for header in ZLIB_HEADERS:
        start = data.find(header)
        while start != -1:
            with contextlib.suppress(zlib.error):  # not a stream: two bytes that look like a header
                parts.append(zlib.decompressobj().decompress(data[start:]))
            start = data.find(header, start + 1)
    return b"".join(parts)


def files_holding(root: Path, token: bytes) -> list[str]:
    """Files under ``root`` whose bytes, or whose compressed streams, hold ``token``."""
    return [str(path) for path in root.rglob("*") if path.is_file() and token in readable(path.read_bytes())]


def traces_of(retrievals: Any) -> list[str]:
    """Every trace of a retrievals table, as JSON text."""
    return [trace_of_row(row) for row in retrievals.to_arrow().to_pylist()]
