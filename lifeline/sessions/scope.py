"""Machine-independent scope of a session: which project it worked on.

``git:<host/owner/repo>:<repo-relative subdir>`` when the session's directory is (or was,
per the transcript) a git checkout with a remote, so the same repository on two laptops
with different usernames and paths is one scope; otherwise ``path:<dir>`` with the home
folder written ``~`` and symlinks resolved.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
from functools import lru_cache
from pathlib import Path

__all__ = [
    "home_normalized",
    "normalize_remote",
    "project_hashes",
    "project_scope",
    "scope_for",
    "scope_matches",
]

_HOME_RE = re.compile(r"^(?:/Users/[^/]+|/home/[^/]+|/root|[A-Za-z]:\\Users\\[^\\]+)(?=/|\\|$)")


@lru_cache(maxsize=1)
def _home() -> str:
    return os.path.expanduser("~")


def home_normalized(path: str, home: str | None = None) -> str:
    """``path`` with this machine's home, or any ``/Users/x``, ``/home/x``, ``/root``
    prefix, written ``~`` — the same for every machine that reads the same file."""
    if not path:
        return path
    home = home if home is not None else _home()
    if home and home != "/" and (path == home or path.startswith(home.rstrip("/") + "/")):
        return "~" + path[len(home.rstrip("/")) :]
    return _HOME_RE.sub("~", path, count=1)


def normalize_remote(url: str) -> str:
    """A remote URL in one form: ``git@github.com:Acme/Api.git`` and
    ``https://u:p@github.com/acme/api`` are both ``github.com/acme/api``."""
    text = url.strip()
    text = re.sub(r"^[a-z][a-z0-9+.\-]*://", "", text, flags=re.IGNORECASE)
    text = re.sub(r"^[^@/]*@", "", text)  # user (and password) before the host
    host, sep, rest = text.partition("/")
    if ":" in host:  # scp-like git@host:owner/repo, or host:port/...
        host, _, after = host.partition(":")
        rest = rest if after.isdigit() else after + (sep + rest if rest else "")
    rest = re.sub(r"\.git/?$", "", rest.rstrip("/"))
    return f"{host}/{rest}".lower().strip("/")


@lru_cache(maxsize=4096)
def _git_root_and_remote(directory: str) -> tuple[str, str] | None:
    """The checkout's top folder and its origin remote, or None (not a checkout, no git)."""
    if not Path(directory).is_dir():
        return None
    try:
        top = subprocess.run(
            ["git", "-C", directory, "rev-parse", "--show-toplevel"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
        if top.returncode != 0:
            return None
        remote = subprocess.run(
            ["git", "-C", directory, "config", "--get", "remote.origin.url"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if remote.returncode != 0 or not remote.stdout.strip():
        return None
    return top.stdout.strip(), remote.stdout.strip()


def scope_for(cwd: str | None, remote_hint: str | None = None) -> str:
    """The scope of a session that ran in ``cwd`` (as written in the transcript)."""
    if not cwd:
        return f"git:{normalize_remote(remote_hint)}:" if remote_hint else "unknown:"
    found = _git_root_and_remote(os.path.realpath(cwd)) if Path(cwd).is_absolute() else None
    if found is not None:
        top, remote = found
        sub = os.path.relpath(os.path.realpath(cwd), os.path.realpath(top))
        return f"git:{normalize_remote(remote)}:{'' if sub == '.' else sub}"
    if remote_hint:
        return f"git:{normalize_remote(remote_hint)}:"
    real = os.path.realpath(cwd) if Path(cwd).exists() else cwd
    return "path:" + home_normalized(real)


def project_scope(root: Path) -> str:
    """The scope of the project at ``root`` (for ``ingest`` without ``--all``)."""
    return scope_for(str(root.resolve()))


def scope_matches(scope: str, wanted: str) -> bool:
    """``scope`` is ``wanted`` or inside it (a subfolder of the same repository/path)."""
    if scope == wanted:
        return True
    if wanted.startswith("git:") and wanted.endswith(":"):
        return scope.startswith(wanted)
    if wanted.startswith("git:"):
        return scope.startswith(wanted + "/")
    return scope.startswith(wanted.rstrip("/") + "/")


def project_hashes(root: Path) -> set[str]:
    """Gemini CLI's ``projectHash`` for a project folder (sha256 of its absolute path, as
    given or with symlinks resolved)."""
    paths = {str(root.absolute()), os.path.realpath(root)}
    return {hashlib.sha256(p.encode()).hexdigest() for p in paths}
