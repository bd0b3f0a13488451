"""The entry rows a damaged SQLite line file still holds, read from its pages directly.

When SQLite itself cannot open or walk a line file (a truncated file, a destroyed header
page, overwritten interior pages), its table-leaf pages usually still hold most rows. This
reads the file (and its ``-wal``, whose committed pages are newer) page by page, decodes the
cells of every table-leaf page (type ``0x0D``), follows the overflow chains of long rows, and
yields the records with the shape of the ``entries`` table (13 columns, the first — ``seq``,
the row id — stored as NULL). Nothing here trusts a record: the caller keeps only entries
whose id matches their content (:func:`lifeline.integrity.recover_line`).

The format is SQLite's documented file format (https://sqlite.org/fileformat2.html):
varints, record headers of serial types, and the local/overflow payload split.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = ["ENTRY_COLUMNS", "Scan", "scan_entry_rows"]

MAGIC = b"SQLite format 3\x00"
ENTRY_COLUMNS = 13  # seq, id, ts, kind, author, agent, provider, model, summary, body, ...
LEAF = 0x0D
GUESSES = (4096, 1024, 2048, 8192, 16384, 32768, 65536, 512)
WAL_MAGIC = (0x377F0682, 0x377F0683)


class Scan:
    """What a scan found: rows of the entries' shape, and how many of those it could not
    rebuild (an overflow page missing or not a continuation)."""

    def __init__(self) -> None:
        self.rows: list[tuple[Any, ...]] = []  # (seq, id, ts, ..., parents, dedup_key)
        self.broken = 0
        self.sequence = 0  # the highest row number sqlite_sequence recorded for entries


def _varint(buf: bytes, at: int) -> tuple[int, int]:
    value = 0
    for i in range(8):
        byte = buf[at + i]
        value = (value << 7) | (byte & 0x7F)
        if byte < 0x80:
            return value, at + i + 1
    return (value << 8) | buf[at + 8], at + 9


def _page_size(head: bytes) -> int | None:
    if head[:16] != MAGIC:
        return None
    size = struct.unpack(">H", head[16:18])[0]
    size = 65536 if size == 1 else size
    return size if size in GUESSES else None


def _looks_like_leaf(page: bytes, start: int) -> bool:
    if page[start] != LEAF:
        return False
    cells, content = struct.unpack(">HH", page[start + 3 : start + 7])
    end = start + 8 + 2 * cells
    return bool(cells > 0 and end <= len(page) and (content or 65536) >= end)


def _guess_page_size(data: bytes) -> int:
    """The page size of a file whose header is gone: the size at which most pages look like
    table leaves (SQLite's default, 4096, on a tie)."""
    best, score = GUESSES[0], -1
    for size in GUESSES:
        pages = [data[at : at + size] for at in range(0, len(data) - size + 1, size)]
        found = sum(1 for page in pages if _looks_like_leaf(page, 0))
        if found > score:
            best, score = size, found
    return best


def _pages(path: Path) -> tuple[dict[int, bytes], int, int]:
    """Page number -> page bytes (the WAL's last copy of a page wins), the page size and
    the usable part of a page (the header's reserved bytes at its end are not)."""
    data = path.read_bytes() if path.exists() else b""
    known = _page_size(data[:100])
    size = known or _guess_page_size(data)
    usable = size - (data[20] if known else 0)
    pages = {1 + at // size: data[at : at + size] for at in range(0, len(data) - size + 1, size)}
    wal = path.with_name(path.name + "-wal")
    if wal.exists():
        _wal_pages(wal.read_bytes(), size, pages)
    return pages, size, usable


def _wal_pages(wal: bytes, size: int, pages: dict[int, bytes]) -> None:
    if len(wal) < 32 or struct.unpack(">I", wal[:4])[0] not in WAL_MAGIC:
        return
    if struct.unpack(">I", wal[8:12])[0] != size:
        return
    frame = 24 + size
    for at in range(32, len(wal) - frame + 1, frame):
        number = struct.unpack(">I", wal[at : at + 4])[0]
        if number:
            pages[number] = wal[at + 24 : at + frame]


def _payload(
    page: bytes, at: int, length: int, pages: dict[int, bytes], usable: int
) -> bytes | None:
    """The ``length`` bytes of a cell's payload starting at ``at``: the local part, then the
    overflow chain. When a page of the chain is missing: None for a row of the entries'
    shape (counted as lost), b"" for any other."""
    most = usable - 35
    if length <= most:
        return page[at : at + length]
    least = (usable - 12) * 32 // 255 - 23
    local = least + (length - least) % (usable - 4)
    local = local if local <= most else least
    parts = [page[at : at + local]]
    got = local
    nxt = struct.unpack(">I", page[at + local : at + local + 4])[0]
    seen: set[int] = set()
    while got < length:
        if not nxt or nxt in seen or nxt not in pages:
            return None if _record(parts[0], header_only=True) is not None else b""
        seen.add(nxt)
        over = pages[nxt]
        take = min(usable - 4, length - got)
        parts.append(over[4 : 4 + take])
        got += take
        nxt = struct.unpack(">I", over[:4])[0]
    return b"".join(parts)


def _value(kind: int, buf: bytes, at: int) -> tuple[Any, int]:
    if kind == 0:
        return None, at
    if 1 <= kind <= 6:
        width = (1, 2, 3, 4, 6, 8)[kind - 1]
        return int.from_bytes(buf[at : at + width], "big", signed=True), at + width
    if kind == 7:
        return struct.unpack(">d", buf[at : at + 8])[0], at + 8
    if kind in (8, 9):
        return kind - 8, at
    if kind >= 12:
        width = (kind - 12) // 2
        raw = buf[at : at + width]
        if len(raw) != width:
            raise ValueError("record runs past its payload")
        return (raw.decode("utf-8") if kind % 2 else raw), at + width
    raise ValueError("reserved serial type")


def _record(payload: bytes, header_only: bool = False) -> list[Any] | None:
    """The values of a record with the entries table's shape; None for any other record
    (with ``header_only``, [] for a record of that shape whose values are not read)."""
    try:
        head, at = _varint(payload, 0)
        kinds = []
        while at < head:
            kind, at = _varint(payload, at)
            kinds.append(kind)
        if len(kinds) != ENTRY_COLUMNS or kinds[0] != 0:  # seq is the row id: NULL here
            return None
        if header_only:
            return []
        values, at = [], head
        for kind in kinds:
            value, at = _value(kind, payload, at)
            values.append(value)
        return values
    except (IndexError, ValueError, UnicodeDecodeError, struct.error):
        return None


def _entries_sequence(payload: bytes) -> int:
    """The row number of a ``sqlite_sequence`` record ``('entries', seq)``; 0 for others."""
    if len(payload) < 11 or payload[:2] != b"\x03\x1b" or payload[3:10] != b"entries":
        return 0  # a 3-byte header: TEXT of 7 bytes, then an integer
    if not 1 <= payload[2] <= 6:
        return 0
    value, _ = _value(payload[2], payload, 10)
    return max(0, int(value))


def _cells(
    number: int, page: bytes, pages: dict[int, bytes], usable: int
) -> Iterator[tuple[int, bytes | None]]:
    start = 100 if number == 1 else 0
    if not _looks_like_leaf(page, start):
        return
    cells = struct.unpack(">H", page[start + 3 : start + 5])[0]
    for i in range(cells):
        at = struct.unpack(">H", page[start + 8 + 2 * i : start + 10 + 2 * i])[0]
        try:
            length, at = _varint(page, at)
            rowid, at = _varint(page, at)
            if at >= usable or length > 1 << 30:
                continue
            yield rowid, _payload(page, at, length, pages, usable)
        except (IndexError, struct.error):
            continue


def scan_entry_rows(path: Path) -> Scan:
    """Every row of the entries table's shape the pages of ``path`` (and its -wal) hold, as
    ``(seq, id, ts, ..., parents, dedup_key)`` like ``SELECT {COLUMNS} FROM entries``."""
    pages, _size, usable = _pages(path)
    scan = Scan()
    for number, page in sorted(pages.items()):
        for rowid, payload in _cells(number, page, pages, usable):
            if payload is None:
                scan.broken += 1  # a long row whose overflow chain is gone
                continue
            scan.sequence = max(scan.sequence, _entries_sequence(payload))
            values = _record(payload)
            if values is not None:
                scan.rows.append((rowid, *values[1:12]))
    return scan
