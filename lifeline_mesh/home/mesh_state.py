"""Where a node keeps its identity and membership: the port, and its files adapter.

A node's signing key, its members registry, revocations, the invites and CI credentials it
issued, its MCP token book and (on the CA holder) the mesh CA key are *documents*, read and
written whole by name. On a laptop they are files in ``.lifeline/mesh/`` (:class:`FileState`,
the default). A hub whose lines live in PostgreSQL keeps them in that database instead
(``lifeline_mesh/home/pg_state.py``), so every hub process on the database is one node and a
process holds nothing of its own but its TLS credentials (docs/hub.md, decision 0032).

A root whose state lives elsewhere says so in ``Home.hub_binding_path`` (``hub.json``): its
lines are in that database (``Home.lines``) and so are its documents. The home chooses the
adapter once, with its line source (``NodeHome.documents``), and every reader takes it from
there (decision 0060).
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any, Protocol

from lifeline import fsutil
from lifeline.errors import ConfigError
from lifeline.fsutil import read_private

__all__ = [
    "CA_CERT",
    "CA_KEY",
    "DOCUMENTS",
    "INVITES",
    "MCP_TOKENS",
    "MEMBERS",
    "NODE_KEY",
    "PRIVATE",
    "REVOCATIONS",
    "DocumentFiles",
    "FileState",
    "HoldsDocuments",
    "MeshState",
    "holds_ca_key",
    "read_doc_json",
]

# The documents by name (their files: NodeHome's key_path, ca_key_path, ... below).
NODE_KEY = "node-key"
CA_KEY = "ca-key"
CA_CERT = "ca-cert"
MEMBERS = "members"
REVOCATIONS = "revocations"
INVITES = "invites"
MCP_TOKENS = "mcp-tokens"
DOCUMENTS = (NODE_KEY, CA_CERT, CA_KEY, MEMBERS, REVOCATIONS, INVITES, MCP_TOKENS)
PRIVATE = frozenset({NODE_KEY, CA_KEY, INVITES, MCP_TOKENS})


class MeshState(Protocol):
    """A node's identity and membership documents, each read and written whole."""

    def where(self, name: str) -> str:
        """Where document ``name`` lives, for messages (a path, or the database)."""
        ...

    def read(self, name: str) -> bytes | None:
        """The document, or None when there is none."""
        ...

    def write(self, name: str, data: bytes) -> None:
        """Replace the document (atomically: a crash leaves the old or the new one)."""
        ...

    def create(self, name: str, data: bytes) -> bool:
        """Write the document only if there is none; whether it was written."""
        ...

    def stamp(self, name: str) -> int:
        """A number that changes whenever the document does (0: none)."""
        ...

    def exclusive(self) -> AbstractContextManager[None]:
        """Hold the node's membership lock across a read-modify-write, across every process
        that shares this state. Never nest it."""
        ...


class DocumentFiles(Protocol):
    """Where the files of the documents are (``NodeHome``, which holds the state it chose:
    so this module names no type of the home's)."""

    @property
    def root(self) -> Path: ...

    def document_path(self, name: str) -> Path: ...

    @property
    def membership_lock_path(self) -> Path: ...


class HoldsDocuments(Protocol):
    """What holds the node's documents (``NodeHome.documents``)."""

    @property
    def documents(self) -> MeshState: ...


class FileState:
    """The documents as files of ``.lifeline/mesh/`` (0600 for the secret ones)."""

    def __init__(self, home: DocumentFiles) -> None:
        self.home = home

    def path(self, name: str) -> Path:
        return self.home.document_path(name)

    def where(self, name: str) -> str:
        return str(self.path(name))

    def read(self, name: str) -> bytes | None:
        path = self.path(name)
        if not path.exists():
            return None
        return read_private(path) if name in PRIVATE else path.read_bytes()

    def write(self, name: str, data: bytes) -> None:
        path = self.path(name)
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fsutil.write_atomic(path, data, mode=0o600 if name in PRIVATE else 0o644)

    def create(self, name: str, data: bytes) -> bool:
        path = self.path(name)
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            return False
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        return True

    def stamp(self, name: str) -> int:
        path = self.path(name)
        return path.stat().st_mtime_ns if path.exists() else 0

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        path = self.home.membership_lock_path
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # releases the lock


def holds_ca_key(home: HoldsDocuments) -> bool:
    """Whether this node holds the mesh CA key: only there are joins served and invites made."""
    return home.documents.read(CA_KEY) is not None


def read_doc_json(home: HoldsDocuments, name: str, default: Any) -> Any:
    """Parse a JSON document of ours; a damaged one is a ConfigError naming where it is."""
    state = home.documents
    raw = state.read(name)
    if raw is None:
        return default
    try:
        return json.loads(raw.decode("utf-8"))
    except ValueError as exc:  # bad JSON or bad UTF-8
        raise ConfigError(
            f"{state.where(name)} is not valid JSON ({exc}); restore it from a backup or "
            "another member"
        ) from exc
