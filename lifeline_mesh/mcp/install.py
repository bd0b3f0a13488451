"""`lifeline-mesh mcp install CLIENT`: write the project's MCP client configuration so that an
agent started in the project runs `lifeline-mesh mcp` on it.

Each client keeps its project servers in a JSON file at the project root (Claude Code's
``.mcp.json``, Cursor's ``.cursor/mcp.json``, VS Code's ``.vscode/mcp.json``, Gemini CLI's
``.gemini/settings.json``); Codex keeps TOML, which this only prints. The entry named
``lifeline`` (``--name``) is added or updated and every other key of the file is kept. An
entry of that name that starts something else is left alone unless ``--force`` -- except
lifeline-context's ``lifeline-mcp``, which is not installed beside us and is replaced. A
file that is not a JSON object is never rewritten.
"""

from __future__ import annotations

import json
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lifeline.errors import ConfigError
from lifeline.fsutil import atomic_file, read_json_object

__all__ = [
    "CLIENTS",
    "CODEX_AGENT",
    "Client",
    "Installed",
    "codex_snippet",
    "install",
    "server_command",
]

PREDECESSOR = "lifeline-mcp"  # lifeline-context's MCP server command


@dataclass(frozen=True, slots=True)
class Client:
    """Where a client keeps project MCP servers, and the shape of an entry."""

    path: str  # relative to the project root
    key: str  # the object of servers in that file
    agent: str  # the name its writes are recorded under (--agent)
    stdio_type: bool = False  # the entry names its transport ("type": "stdio")


CLIENTS = {
    "claude-code": Client(".mcp.json", "mcpServers", "claude-code"),
    "cursor": Client(".cursor/mcp.json", "mcpServers", "cursor"),
    "vscode": Client(".vscode/mcp.json", "servers", "copilot", stdio_type=True),
    "gemini": Client(".gemini/settings.json", "mcpServers", "gemini"),
}
CODEX_AGENT = "codex"


@dataclass(frozen=True, slots=True)
class Installed:
    path: Path
    entry: dict[str, Any]
    changed: bool
    replaced: str | None  # the command of the entry it replaced, if any


def server_command() -> tuple[str, str | None]:
    """The command a client should run, and a note when it is not simply ``lifeline-mesh``:
    the name when ``PATH`` finds this installation's, else its absolute path."""
    ours = Path(sys.executable).parent / "lifeline-mesh"
    found = shutil.which("lifeline-mesh")
    if found is not None and (not ours.exists() or Path(found).resolve() == ours.resolve()):
        return "lifeline-mesh", None
    if ours.exists():
        where = "is not on PATH" if found is None else f"on PATH is another ({found})"
        return str(ours), f"`lifeline-mesh` {where}: the entry names {ours}"
    return "lifeline-mesh", "`lifeline-mesh` is not on PATH: the client must find it there"


def _args(root: Path, agent: str, line: str | None) -> list[str]:
    args = ["mcp", "--root", str(root), "--agent", agent]
    return [*args, "--line", line] if line else args


def _entry(client: Client, command: str, args: list[str]) -> dict[str, Any]:
    entry: dict[str, Any] = {"type": "stdio"} if client.stdio_type else {}
    entry.update(command=command, args=args)
    return entry


def _in_project(root: Path, relative: str) -> Path:
    """The file a client's configuration is read from and written to: ``root/relative``
    with its links followed, refused when they lead out of the project. A clone carries
    links (git keeps them): a ``.mcp.json`` leading to a JSON file of the user's (a Docker
    ``config.json`` with registry passwords) would be copied into the project's file, which
    gets committed; a linked ``.vscode`` would take ours into another folder."""
    path = root / relative
    try:
        target = path.resolve()
        inside = target.is_relative_to(root.resolve())
    except (OSError, RuntimeError) as exc:  # a loop: RuntimeError before Python 3.13
        raise ConfigError(f"{path} is a symbolic link that cannot be followed ({exc})") from exc
    if not inside:
        raise ConfigError(
            f"{path} leads out of the project, to {target} (a symbolic link); the MCP "
            "configuration is written only inside the project: remove the link, then run "
            "this again"
        )
    return target


def install(
    root: Path,
    client: Client,
    *,
    command: str,
    name: str,
    agent: str,
    line: str | None,
    force: bool,
) -> Installed:
    """Add or update the entry ``name`` of ``client``'s file in the project at ``root``,
    which runs ``command`` (:func:`server_command`)."""
    path = _in_project(root, client.path)
    _text, data = read_json_object(path)
    servers = data.setdefault(client.key, {})
    if not isinstance(servers, dict):
        raise ConfigError(f"{path}: {client.key!r} is not an object; fix it or move it aside")
    entry = _entry(client, command, _args(root, agent, line))
    held = servers.get(name)
    if held == entry:
        return Installed(path, entry, changed=False, replaced=None)
    replaced = None
    if held is not None:
        replaced = str(held.get("command")) if isinstance(held, dict) else repr(held)
        ours = Path(replaced).name in ("lifeline-mesh", PREDECESSOR)
        if not ours and not force:
            raise ConfigError(
                f"{path} already has a server named {name!r} that runs {replaced!r}; pass "
                "--force to replace it, or --name NAME to add ours beside it"
            )
    servers[name] = entry
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_file(path) as out:  # its mode kept (a new file: 0644, as project files are)
        out.write((json.dumps(data, indent=2) + "\n").encode("utf-8"))
    return Installed(path, entry, changed=True, replaced=replaced)


def codex_snippet(root: Path, *, command: str, name: str, agent: str, line: str | None) -> str:
    """The TOML table Codex reads (``.codex/config.toml`` or ``~/.codex/config.toml``)."""
    args = ", ".join(json.dumps(a) for a in _args(root, agent, line))
    return f"[mcp_servers.{name}]\ncommand = {json.dumps(command)}\nargs = [{args}]\n"
