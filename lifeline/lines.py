"""Lines: independent ledgers of one project, one SQLite file each under ``.lifeline/``."""

from __future__ import annotations

import re
from pathlib import Path

from lifeline.errors import ConfigError, NotFound

__all__ = [
    "DEFAULT_LINE",
    "EXTERNAL_ANCHOR",
    "LEDGER_DIR",
    "line_names",
    "line_path",
    "projection_path",
    "validate_line_name",
]

DEFAULT_LINE = "ledger"
# What a declared external parent names instead of a line when it is an *anchor*: an entry
# known only by its id (an import could not reproduce it), in no line. Not a valid line name.
EXTERNAL_ANCHOR = "(anchor)"
LEDGER_DIR = ".lifeline"
_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")


def validate_line_name(name: str) -> str:
    """Return ``name`` when it is a valid line name, else raise ConfigError."""
    if not _NAME.fullmatch(name):
        raise ConfigError(
            f"line name {name!r} is not valid; use 1-64 characters of a-z, 0-9, '-' or '_', "
            "starting with a letter or digit"
        )
    return name


def line_path(root: Path, name: str, *, must_exist: bool = False) -> Path:
    """The file of line ``name`` under project ``root``."""
    path = root / LEDGER_DIR / f"{validate_line_name(name)}.db"
    if must_exist and not path.exists():
        known = ", ".join(line_names(root)) or "none"
        raise NotFound(
            f"line {name!r} does not exist under {root} (lines: {known}); "
            f"create it with `lifeline --line {name} init`"
        )
    return path


def line_names(root: Path) -> list[str]:
    """The lines present under ``root``, sorted."""
    folder = root / LEDGER_DIR
    if not folder.is_dir():
        return []
    return sorted(p.stem for p in folder.glob("*.db") if _NAME.fullmatch(p.stem))


def projection_path(root: Path, name: str) -> Path:
    """``LIFELINE.md`` for the default line, ``LIFELINE.<line>.md`` for the others."""
    if name == DEFAULT_LINE:
        return root / "LIFELINE.md"
    return root / f"LIFELINE.{validate_line_name(name)}.md"
