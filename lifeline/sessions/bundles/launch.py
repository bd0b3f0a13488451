"""Starting an agent tool with a bundle as its first prompt (``resume --launch``).

Each tool's own way (documented in docs/sessions.md, "Resume"):

- Claude Code: ``claude [PROMPT]`` starts an interactive session whose first user message
  is PROMPT.
- Codex CLI: ``codex [PROMPT]`` starts the interactive TUI with PROMPT as the first message.
- Gemini CLI: ``gemini --prompt-interactive PROMPT`` (``-i``) runs PROMPT and stays
  interactive (a bare ``--prompt`` would exit after one answer).

The prompt travels in argv, as these CLIs expect; argv is visible to other users of the
machine in ``ps``, and a single argument is limited to 128 KiB on Linux — both reasons the
bundle is redacted and budgeted before it gets here.
"""

from __future__ import annotations

import os
import shutil

from lifeline.errors import ConfigError

__all__ = ["LAUNCHERS", "MAX_ARG_BYTES", "launch", "launch_argv"]

LAUNCHERS: dict[str, tuple[str, tuple[str, ...]]] = {
    "claude": ("claude", ()),
    "codex": ("codex", ()),
    "gemini": ("gemini", ("--prompt-interactive",)),
}
MAX_ARG_BYTES = 128 * 1024 - 1


def launch_argv(tool: str, prompt: str) -> list[str]:
    """The command line that starts ``tool`` with ``prompt`` as its first message."""
    if tool not in LAUNCHERS:
        raise ConfigError(f"cannot launch {tool!r}; use one of {', '.join(LAUNCHERS)}")
    if len(prompt.encode()) > MAX_ARG_BYTES:
        raise ConfigError(
            f"the bundle is {len(prompt.encode())} bytes, over the {MAX_ARG_BYTES}-byte "
            "limit of one argument; give a smaller --budget"
        )
    program, flags = LAUNCHERS[tool]
    return [program, *flags, prompt]


def launch(tool: str, prompt: str) -> None:
    """Replace this process with the tool (never returns unless it cannot start)."""
    argv = launch_argv(tool, prompt)
    path = shutil.which(argv[0])
    if path is None:
        raise ConfigError(f"{argv[0]} is not on PATH; install it or print the bundle instead")
    os.execv(path, argv)
