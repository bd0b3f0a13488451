"""Hook entries in the agent tools' own config files (``lifeline hooks install``).

All three tools read the same nested shape — event → matcher groups → command handlers::

    {"hooks": {"SessionStart": [{"matcher": "…", "hooks": [{"type": "command",
                                                             "command": "…"}]}]}}

- Claude Code: ``$CLAUDE_CONFIG_DIR/settings.json`` (default ``~/.claude``); events
  ``SessionStart`` and ``SessionEnd``.
- Codex CLI: ``$CODEX_HOME/hooks.json`` (default ``~/.codex``); events ``SessionStart`` and
  ``Stop`` (after every turn: ingesting is incremental, so each pass costs the new lines).
  Codex runs hooks only with ``[features] codex_hooks = true`` in its ``config.toml``,
  which we tell the user rather than edit.
- Gemini CLI: ``~/.gemini/settings.json``; events ``SessionStart`` and ``SessionEnd``.

Our handlers are recognised by their command (``… hooks run … --client NAME``), so
installing twice changes nothing, and uninstalling removes only ours. Everything else in
the file is kept as it was (key order included); a file that is not a JSON object is
refused, never overwritten.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lifeline.errors import ConfigError
from lifeline.fsutil import link_target, read_json_object, write_atomic

__all__ = ["CLIENTS", "Client", "HookChange", "config_path", "plan_change", "write_change"]


@dataclass(frozen=True, slots=True)
class Client:
    name: str
    env: str | None  # the variable that moves the tool's config folder
    default_dir: str  # under the home folder
    file: str
    start: str  # session start event
    end: str  # session (or turn) end event
    note: str = ""


CLIENTS: dict[str, Client] = {
    "claude-code": Client(
        "claude-code", "CLAUDE_CONFIG_DIR", ".claude", "settings.json", "SessionStart", "SessionEnd"
    ),
    "codex": Client(
        "codex",
        "CODEX_HOME",
        ".codex",
        "hooks.json",
        "SessionStart",
        "Stop",
        note="Codex runs hooks only with `[features] codex_hooks = true` in config.toml",
    ),
    "gemini": Client("gemini", None, ".gemini", "settings.json", "SessionStart", "SessionEnd"),
}


@dataclass(frozen=True, slots=True)
class HookChange:
    path: Path
    before: str  # "" when the file does not exist
    after: str

    @property
    def changed(self) -> bool:
        return self.before != self.after

    def diff(self) -> str:
        return "".join(
            difflib.unified_diff(
                self.before.splitlines(keepends=True),
                self.after.splitlines(keepends=True),
                fromfile=f"{self.path} (before)",
                tofile=f"{self.path} (after)",
            )
        )


def client_of(name: str) -> Client:
    if name not in CLIENTS:
        raise ConfigError(f"unknown client {name!r}; use one of {', '.join(CLIENTS)}")
    return CLIENTS[name]


def config_path(client: Client, config_dir: Path | None, env: dict[str, str]) -> Path:
    """The file to edit: ``--config-dir``, else the tool's variable, else its home folder."""
    if config_dir is not None:
        return config_dir / client.file
    if client.env and env.get(client.env):
        return Path(env[client.env]) / client.file
    home = Path(env.get("HOME") or Path.home())
    return home / client.default_dir / client.file


def _ours(handler: Any, client: Client) -> bool:
    command = handler.get("command") if isinstance(handler, dict) else None
    return isinstance(command, str) and " hooks run " in command and client.name in command


def _strip(hooks: dict[str, Any], client: Client) -> None:
    for event in list(hooks):
        groups = hooks[event]
        if not isinstance(groups, list):
            continue
        kept = []
        for group in groups:
            if isinstance(group, dict) and isinstance(group.get("hooks"), list):
                handlers = [h for h in group["hooks"] if not _ours(h, client)]
                if not handlers and len(handlers) != len(group["hooks"]):
                    continue
                group = {**group, "hooks": handlers}
            kept.append(group)
        if kept:
            hooks[event] = kept
        else:
            del hooks[event]


def plan_change(path: Path, client: Client, commands: dict[str, str] | None) -> HookChange:
    """The file before and after: ``commands`` maps ``start``/``end`` to the command lines
    to install; ``None`` uninstalls."""
    before, data = read_json_object(path)
    data = json.loads(json.dumps(data))  # a copy to change
    hooks = data.get("hooks", {})
    if not isinstance(hooks, dict):
        raise ConfigError(f"{path}: 'hooks' is not an object; nothing was changed")
    hooks = dict(hooks)
    _strip(hooks, client)
    if commands is not None:
        for role, event in (("start", client.start), ("end", client.end)):
            entry = {"type": "command", "command": commands[role], "timeout": 30}
            if client.name == "gemini":
                entry["name"] = f"lifeline-session-{role}"
            hooks.setdefault(event, []).append({"hooks": [entry]})
    if hooks:
        data["hooks"] = hooks
    else:
        data.pop("hooks", None)
    original = json.loads(before) if before.strip() else {}
    if data == original:  # nothing to do: the user's file is left byte for byte
        return HookChange(path, before, before)
    return HookChange(path, before, json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def write_change(change: HookChange) -> None:
    """Write the new file (atomically; an existing file keeps its mode). A file that is a
    symbolic link (a dotfiles repository's) stays one: the file it leads to is replaced."""
    if change.changed:
        change.path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(link_target(change.path), change.after.encode("utf-8"))
