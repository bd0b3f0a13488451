"""A line file damaged in place, as a failing disk would (the damaged-line tests')."""

from __future__ import annotations

from pathlib import Path

PAGE = 4096


def damage_pages(path: Path) -> None:
    """Overwrite three pages in the middle of the file, in place: same file, same size."""
    size = path.stat().st_size
    with path.open("r+b") as fh:
        for page in range(size // PAGE // 2, size // PAGE // 2 + 3):
            fh.seek(page * PAGE)
            fh.write(b"\xde\xad\xbe\xef" * (PAGE // 4))
