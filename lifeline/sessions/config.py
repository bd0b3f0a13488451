"""Session settings: the ``sessions`` object of ``.lifeline/config.json`` (all optional).

::

    {"sessions": {"line": "sessions", "tool_output_cap": 8000, "text_cap": 24000,
                  "part_bytes": 48000, "live_minutes": 10,
                  "redact": [{"name": "acme-ticket", "pattern": "ACME-[0-9]{6}"}]}}

Caps and patterns change what is written, hence the ids: keep them equal on every machine
of a mesh so two machines ingesting one file still agree.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from lifeline.errors import ConfigError
from lifeline.home import Home
from lifeline.lines import validate_line_name
from lifeline.sessions.caps import Caps
from lifeline.wording import noun

__all__ = [
    "DEFAULT_SESSIONS_LINE",
    "SessionSettings",
    "load_session_settings",
]

DEFAULT_SESSIONS_LINE = "sessions"
_INTS = {"tool_output_cap": 200, "text_cap": 200, "part_bytes": 4_000, "live_minutes": 0}


@dataclass(frozen=True)
class SessionSettings:
    line: str = DEFAULT_SESSIONS_LINE
    caps: Caps = field(default_factory=Caps)
    patterns: tuple[tuple[str, str], ...] = ()
    live_window: timedelta = timedelta(minutes=10)


def load_session_settings(home: Home) -> SessionSettings:
    path = home.settings_path
    if not path.exists():
        return SessionSettings()
    try:
        data: Any = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path} is not readable JSON ({exc}); fix or remove it") from exc
    given = data.get("sessions", {}) if isinstance(data, dict) else None
    if not isinstance(given, dict):
        raise ConfigError(f'{path}: "sessions" must be an object')
    unknown = sorted(set(given) - {"line", "redact", *_INTS})
    if unknown:
        raise ConfigError(f"{path}: unknown sessions {noun(len(unknown), 'setting')} {unknown}")
    for name, floor in _INTS.items():
        value = given.get(name)
        if value is not None and (
            not isinstance(value, int) or isinstance(value, bool) or value < floor
        ):
            raise ConfigError(f"{path}: sessions.{name} must be an integer >= {floor}")
    defaults = Caps()
    caps = Caps(
        tool_output=given.get("tool_output_cap", defaults.tool_output),
        text=given.get("text_cap", defaults.text),
        part_bytes=given.get("part_bytes", defaults.part_bytes),
    )
    return SessionSettings(
        line=validate_line_name(str(given.get("line", DEFAULT_SESSIONS_LINE))),
        caps=caps,
        patterns=_patterns(path, given.get("redact", [])),
        live_window=timedelta(minutes=given.get("live_minutes", 10)),
    )


def _patterns(path: Path, given: Any) -> tuple[tuple[str, str], ...]:
    if not isinstance(given, list):
        raise ConfigError(f'{path}: sessions.redact must be a list of {{"name", "pattern"}}')
    found = []
    for rule in given:
        if not isinstance(rule, dict) or not isinstance(rule.get("pattern"), str):
            raise ConfigError(f'{path}: each sessions.redact rule needs a "pattern" string')
        name = str(rule.get("name") or "custom")
        if not re.fullmatch(r"[a-z0-9][a-z0-9-]{0,40}", name):
            raise ConfigError(f"{path}: redact rule name {name!r}: use a-z, 0-9 and '-'")
        try:
            re.compile(rule["pattern"])
        except re.error as exc:
            raise ConfigError(f"{path}: redact pattern {rule['pattern']!r}: {exc}") from exc
        found.append((name, rule["pattern"]))
    return tuple(found)
