"""Lines: independent ledgers of one project, one SQLite file each (:mod:`lifeline.home`)."""

from __future__ import annotations

import re

from lifeline.errors import ConfigError

__all__ = [
    "DEFAULT_LINE",
    "EXTERNAL_ANCHOR",
    "is_line_name",
    "validate_line_name",
]

DEFAULT_LINE = "ledger"
# What a declared external parent names instead of a line when it is an *anchor*: an entry
# known only by its id (an import could not reproduce it), in no line. Not a valid line name.
EXTERNAL_ANCHOR = "(anchor)"
_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}\Z")


def validate_line_name(name: str) -> str:
    """Return ``name`` when it is a valid line name, else raise ConfigError."""
    if not _NAME.fullmatch(name):
        raise ConfigError(
            f"line name {name!r} is not valid; use 1-64 characters of a-z, 0-9, '-' or '_', "
            "starting with a letter or digit"
        )
    return name


def is_line_name(name: str) -> bool:
    return _NAME.fullmatch(name) is not None
