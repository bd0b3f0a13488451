"""A strict reader for the small YAML subset our compose file uses (no YAML library here).

Block mappings and block sequences by indentation, `#` comments, plain or double-quoted
scalars, flow sequences of double-quoted strings, and empty values (null). Anything else —
anchors, aliases, merge keys, flow mappings, multi-line scalars, tabs — is refused with the
line number, so the file cannot drift into YAML this reader would misread.
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["YamlSubsetError", "parse"]

_KEY = re.compile(r"^([A-Za-z0-9_.-]+):(?: (.*))?$")


class YamlSubsetError(ValueError):
    """The text is outside the subset (or malformed); the message names the line."""


def _scalar(text: str, lineno: int) -> Any:
    text = text.strip()
    if text.startswith(("&", "*", "{", "|", ">", "'", "!")) or text.startswith("<<"):
        raise YamlSubsetError(f"line {lineno}: unsupported YAML construct {text!r}")
    if text.startswith("["):
        value = json.loads(text)
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise YamlSubsetError(f"line {lineno}: flow sequence must hold quoted strings")
        return value
    if text.startswith('"'):
        return json.loads(text)
    if text in ("", "~", "null"):
        return None
    return text


def _lines(text: str) -> list[tuple[int, int, str]]:
    out = []
    for lineno, raw in enumerate(text.splitlines(), 1):
        if "\t" in raw:
            raise YamlSubsetError(f"line {lineno}: tab character")
        stripped = raw.split(" #", 1)[0].rstrip() if not raw.lstrip().startswith("#") else ""
        if stripped:
            out.append((lineno, len(stripped) - len(stripped.lstrip(" ")), stripped.strip()))
    return out


def _block(lines: list[tuple[int, int, str]], pos: int, indent: int) -> tuple[Any, int]:
    lineno, _, first = lines[pos]
    if first.startswith("- "):
        items: list[Any] = []
        while pos < len(lines) and lines[pos][1] == indent and lines[pos][2].startswith("- "):
            item = lines[pos][2][2:]
            if _KEY.match(item) and not item.startswith('"'):
                raise YamlSubsetError(f"line {lines[pos][0]}: mappings inside sequences")
            items.append(_scalar(item, lines[pos][0]))
            pos += 1
        return items, pos
    mapping: dict[str, Any] = {}
    while pos < len(lines) and lines[pos][1] == indent:
        lineno, _, content = lines[pos]
        match = _KEY.match(content)
        if match is None:
            raise YamlSubsetError(f"line {lineno}: expected `key: value`, got {content!r}")
        key, rest = match.group(1), match.group(2)
        if key in mapping:
            raise YamlSubsetError(f"line {lineno}: duplicate key {key!r}")
        pos += 1
        if rest is None and pos < len(lines) and lines[pos][1] > indent:
            mapping[key], pos = _block(lines, pos, lines[pos][1])
        else:
            mapping[key] = _scalar(rest or "", lineno)
    if pos < len(lines) and lines[pos][1] > indent:
        raise YamlSubsetError(f"line {lines[pos][0]}: unexpected indentation")
    return mapping, pos


def parse(text: str) -> Any:
    lines = _lines(text)
    if not lines:
        return None
    value, pos = _block(lines, 0, lines[0][1])
    if pos != len(lines):
        raise YamlSubsetError(f"line {lines[pos][0]}: unexpected indentation")
    return value
