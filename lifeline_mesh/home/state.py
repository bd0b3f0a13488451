"""The running node's state file (``NodeHome.state_path``) and its serve lock.

``lifeline-mesh serve`` writes it once it listens (address, join port, pid, node and mesh id,
discovery settings) and removes it when it stops, so ``lifeline-mesh status`` in another
shell can tell whether a node serves this project and where, and ``invite`` names its join
port. A file left behind by a killed node is
recognised by its pid no longer running.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any

from lifeline.errors import ConfigError
from lifeline.fsutil import atomic_file
from lifeline_mesh.home.node_home import NodeHome

__all__ = [
    "NodeState",
    "clear_node_state",
    "pid_alive",
    "read_node_state",
    "recorded_node_state",
    "serve_lock",
    "write_node_state",
]


@dataclass(slots=True)
class NodeState:
    pid: int
    listen: str
    started_at: float
    node_id: str | None = None
    mesh_id: str | None = None
    discovery: bool = False
    interfaces: list[str] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)
    join: str | None = None  # the join port, on the CA holder (`invite` names it)


def serving_state(
    listen: str,
    node_id: str | None,
    lines: list[str],
    *,
    mesh_id: str | None,
    discovery: bool,
    interfaces: Sequence[str],
    join: str | None = None,
) -> NodeState:
    """The state file of a node serving on ``listen`` from now (discovery only in a mesh)."""
    discovery = discovery and mesh_id is not None
    return NodeState(
        pid=os.getpid(),
        listen=listen,
        started_at=time.time(),
        node_id=node_id,
        mesh_id=mesh_id,
        discovery=discovery,
        interfaces=list(interfaces) if discovery else [],
        lines=lines,
        join=join,
    )


def pid_alive(pid: int) -> bool:
    """Whether a process with ``pid`` exists (signal 0 checks without sending anything)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, owned by someone else
        return True
    return True


def write_node_state(home: NodeHome, state: NodeState) -> None:
    """Record that a node serves ``home`` (atomic replace)."""
    path = home.state_path
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    text = json.dumps(asdict(state), indent=2, sort_keys=True) + "\n"
    with atomic_file(path, mode=0o600, durable=False) as out:
        out.write(text.encode("utf-8"))


def clear_node_state(home: NodeHome, pid: int) -> None:
    """Remove the state file if it is ``pid``'s (never another node's)."""
    try:
        current = read_node_state(home)
    except ConfigError:
        current = None
    if current is not None and current.pid == pid:
        home.state_path.unlink(missing_ok=True)


def read_node_state(home: NodeHome) -> NodeState | None:
    """The recorded state, or None when no node recorded one."""
    path = home.state_path
    if not path.exists():
        return None
    try:
        data: Any = json.loads(path.read_text(encoding="utf-8"))
        known = {k: data[k] for k in NodeState.__dataclass_fields__ if k in data}
        return NodeState(**known)
    except (ValueError, TypeError) as exc:
        raise ConfigError(
            f"{path} is not a node state file ({exc}); delete it, `serve` rewrites it"
        ) from exc


@contextmanager
def recorded_node_state(home: NodeHome, state: NodeState) -> Iterator[NodeState]:
    """Write the state file for the duration of a ``with`` block."""
    write_node_state(home, state)
    try:
        yield state
    finally:
        clear_node_state(home, state.pid)


@contextmanager
def serve_lock(home: NodeHome) -> Iterator[None]:
    """Hold the root's exclusive serve lock, or refuse naming the process that holds it.

    A lock, not a pid file: the kernel releases it when its holder exits, even by SIGKILL,
    so a killed node never blocks the next one.
    """
    path = home.serve_lock_path
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 32).decode("ascii", "replace").strip() or "?"
            raise ConfigError(
                f"another `lifeline-mesh serve` (pid {holder}) already serves {home.root}; "
                "stop it first, or use that node (`lifeline-mesh status`)"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
        yield
    finally:
        os.close(fd)
