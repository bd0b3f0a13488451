"""Reading docker/'s compose files and the service tables of docker/README.md (tests/deploy/)."""

from __future__ import annotations

import re
from typing import Any

from tests.support.paths import REPO

__all__ = ["DOCKER", "defaults", "documented_topology", "service_env"]

DOCKER = REPO / "docker"


def defaults(value: Any) -> Any:
    """The value with each `${VAR:-default}` replaced by its default (compose's reading when
    VAR is unset)."""
    if isinstance(value, str):
        return re.sub(r"\$\{\w+:-([^}]*)\}", r"\1", value)
    if isinstance(value, list):
        return [defaults(v) for v in value]
    if isinstance(value, dict):
        return {k: defaults(v) for k, v in value.items()}
    return value


def documented_topology(heading: str = "## Topology") -> dict[str, dict[str, list[str]]]:
    """The service table under ``heading`` in docker/README.md."""
    text = (DOCKER / "README.md").read_text(encoding="utf-8")
    section = text.split(f"\n{heading}\n", 1)[1].split("\n## ", 1)[0]
    rows = [r for r in section.splitlines() if re.match(r"^\| (?!service )[a-z][\w-]* \|", r)]
    table: dict[str, dict[str, list[str]]] = {}
    for row in rows:
        name, _role, peers, volumes, ports = (c.strip() for c in row.strip("|").split("|"))

        def cells(value: str) -> list[str]:
            return [] if value == "—" else [v.strip() for v in value.split(",")]

        table[name] = {"peers": cells(peers), "volumes": cells(volumes), "ports": cells(ports)}
    return table


def service_env(service: dict[str, Any], key: str) -> str:
    value = (service.get("environment") or {}).get(key, "")
    assert isinstance(value, str)
    return value
