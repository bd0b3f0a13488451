"""Project settings (``Home.settings_path``, optional), e.g. the size caps.

::

    {"limits": {"summary_bytes": 1000, "body_bytes": 64000, "field_bytes": 200,
                "max_parents": 64, "dedup_key_bytes": 200}}

Every key is optional; a missing file means the documented defaults
(:data:`lifeline.validate.DEFAULT_LIMITS`). The same caps apply to local writes and to
entries received from peers, so keep them equal across a mesh.
"""

from __future__ import annotations

import json
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

from lifeline.errors import ConfigError
from lifeline.validate import DEFAULT_LIMITS, Limits
from lifeline.wording import noun

__all__ = ["read_limits"]


def read_limits(path: Path) -> Limits:
    """The size caps in settings file ``path``: defaults overridden by its ``limits``."""
    if not path.exists():
        return DEFAULT_LIMITS
    try:
        data: Any = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path} is not readable JSON ({exc}); fix or remove it") from exc
    given = data.get("limits", {}) if isinstance(data, dict) else None
    if not isinstance(given, dict):
        raise ConfigError(f'{path}: "limits" must be an object of byte counts')
    known = {f.name for f in fields(Limits)}
    unknown = sorted(set(given) - known)
    if unknown:
        raise ConfigError(
            f"{path}: unknown {noun(len(unknown), 'limit')} {unknown}; known: {sorted(known)}"
        )
    for name, value in given.items():
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ConfigError(f"{path}: limit {name} must be a positive integer, got {value!r}")
    return replace(DEFAULT_LIMITS, **given)
