"""The node's home: the project's :class:`~lifeline.home.Home` plus the node's own files.

::

    <root>/.lifeline/
      policy.json          what MCP agents may do (mcp/policy.py; its path is the Home's)
      mesh/                the node's files, 0700; never synced
        config.json        shared lines, static peers, listen address (home/config.py)
        node.key           ed25519 signing key, 0600 (home/identity.py)
        state.json         the running `serve` (home/state.py), serve.lock its lock
        inbound.json       the last session of each caller (home/inbound.py)
        peers.json         the peer table (peering/table.py)
        ca.pem, ca.key     the mesh CA certificate; its key only where the mesh was made
        tls.pem, tls.key   this node's mesh certificate and its P-256 key
        members.json       the members registry (membership/registry.py)
        revocations.json   signed revocations (membership/revocation.py)
        invites.json       invites and CI credentials issued here, 0600 (membership/invite.py)
        .membership.lock   held across a read-modify-write of the membership files
        proposals.db       agents' proposals waiting for a human (mcp/proposals.py)
        mcp-tokens.json    remote MCP bearer tokens issued here, hashed, 0600 (mcp/tokens.py)
        hub.json           a hub process root: the database that holds the node's key,
                           CA key, members, revocations, invites and MCP tokens instead of
                           the files above (home/mesh_state.py, home/pg_state.py), 0600
      ci/                  a CI job's files (ci/job.py)
        job.txt            peer and lines, for `ci finish` in a later step
        lifeline-context.md  every line's context, named by $LIFELINE_CONTEXT_FILE
        unsynced-<line>.md   a line's projection when the job could not sync back

The home also holds what it opened (decision 0060): :attr:`NodeHome.documents`, where the
identity and membership documents live (these files, or a hub's ``node_state`` table), chosen
once with the line source (:attr:`lifeline.home.Home.lines`), never re-discovered by a
caller. Built once by each entry point of ``lifeline-mesh`` (its commands, ``serve``, the
MCP server, the viewer, the demo, CI) and passed down; no other module names these files.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar, cast

from lifeline.home import Home
from lifeline_mesh.home.mesh_state import (
    CA_CERT,
    CA_KEY,
    INVITES,
    MCP_TOKENS,
    MEMBERS,
    NODE_KEY,
    REVOCATIONS,
    FileState,
    MeshState,
)

__all__ = ["NodeHome"]

MESH_DIR = "mesh"
CI_DIR = "ci"

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class NodeHome(Home):
    """A project seen by its node: the lines and settings, and the node's files."""

    # Where the identity and membership documents live: chosen once (``documents``)
    state: MeshState | None = field(default=None, compare=False, repr=False)
    # What was read from the home and is kept while it does not change (the config, the
    # signers, the revocations, with the stamps they were read at): the home's, not a module's
    held: dict[str, tuple[object, object]] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def of(cls, home: Home) -> NodeHome:
        """``home`` seen by its node, sharing the line source ``home`` chose."""
        return home if isinstance(home, NodeHome) else cls(home.root, home.lines)

    @property
    def documents(self) -> MeshState:
        """The node's documents: in the database of a hub's line source, else the files of
        ``.lifeline/mesh/`` (chosen on first use, with the lines, and kept)."""
        if self.state is None:
            url = self.lines.url
            if url is None:
                chosen: MeshState = FileState(self)
            else:
                from lifeline_mesh.home.pg_state import PgState  # the driver only on a hub

                chosen = PgState.for_url(url)
            object.__setattr__(self, "state", chosen)
        assert self.state is not None
        return self.state

    def document_path(self, name: str) -> Path:
        """The file of identity or membership document ``name`` (home/mesh_state.py)."""
        paths = {
            NODE_KEY: self.key_path,
            CA_KEY: self.ca_key_path,
            CA_CERT: self.ca_cert_path,
            MEMBERS: self.members_path,
            REVOCATIONS: self.revocations_path,
            INVITES: self.invites_path,
            MCP_TOKENS: self.mcp_tokens_path,
        }
        try:
            return paths[name]
        except KeyError:
            raise ValueError(f"no node document named {name!r}") from None

    def kept(self, key: str, names: Sequence[str], load: Callable[[], T]) -> T:
        """``load()``, kept on this home and done again only when one of the documents
        ``names`` changed — by this process or any other: their stamps (a file's mtime, a
        hub's row version) are the change notice, asked before each use and before the
        load, so a load racing a write is done again next time. A running node reads its
        membership documents once, not at every session (decision 0076). What it returns
        is shared: read it, do not change it."""
        stamps = tuple(self.documents.stamp(name) for name in names)
        held = self.held.get(key)
        if held is None or held[0] != stamps:
            held = self.held[key] = (stamps, load())
        return cast(T, held[1])

    @property
    def mesh_dir(self) -> Path:
        """Where the node keeps its key, certificates, config and run state."""
        return self.dir / MESH_DIR

    # The node's config, identity and run state.

    @property
    def config_path(self) -> Path:
        return self.mesh_dir / "config.json"

    @property
    def key_path(self) -> Path:
        return self.mesh_dir / "node.key"

    @property
    def state_path(self) -> Path:
        return self.mesh_dir / "state.json"

    @property
    def serve_lock_path(self) -> Path:
        """Held by the one ``serve`` of a root; the kernel drops it at exit."""
        return self.mesh_dir / "serve.lock"

    @property
    def inbound_path(self) -> Path:
        return self.mesh_dir / "inbound.json"

    @property
    def snapshots_dir(self) -> Path:
        """The serving node's snapshots of its sets, kept between runs (a cache)."""
        return self.mesh_dir / "snapshots"

    @property
    def peers_path(self) -> Path:
        return self.mesh_dir / "peers.json"

    # Membership.

    @property
    def ca_cert_path(self) -> Path:
        """The mesh CA certificate: every member has it."""
        return self.mesh_dir / "ca.pem"

    @property
    def ca_key_path(self) -> Path:
        """The CA private key: only on the node that created the mesh."""
        return self.mesh_dir / "ca.key"

    @property
    def tls_cert_path(self) -> Path:
        """This node's certificate, issued by the mesh CA."""
        return self.mesh_dir / "tls.pem"

    @property
    def tls_key_path(self) -> Path:
        """This node's P-256 TLS key."""
        return self.mesh_dir / "tls.key"

    @property
    def members_path(self) -> Path:
        return self.mesh_dir / "members.json"

    @property
    def revocations_path(self) -> Path:
        return self.mesh_dir / "revocations.json"

    @property
    def invites_path(self) -> Path:
        """Invites and CI credentials this node issued, and whether they were used."""
        return self.mesh_dir / "invites.json"

    @property
    def membership_lock_path(self) -> Path:
        """Held across a read-modify-write of the membership files."""
        return self.mesh_dir / ".membership.lock"

    def in_mesh(self) -> bool:
        """Whether this node holds a mesh CA certificate (it joined or made a mesh)."""
        return self.ca_cert_path.exists()

    # Agents.

    @property
    def proposals_path(self) -> Path:
        return self.mesh_dir / "proposals.db"

    @property
    def mcp_tokens_path(self) -> Path:
        """The bearer tokens of remote MCP this node issued (their SHA-256 only), 0600."""
        return self.mesh_dir / "mcp-tokens.json"

    # CI jobs.

    @property
    def ci_dir(self) -> Path:
        return self.dir / CI_DIR

    @property
    def ci_job_path(self) -> Path:
        return self.ci_dir / "job.txt"

    @property
    def ci_context_path(self) -> Path:
        return self.ci_dir / "lifeline-context.md"

    def ci_unsynced_path(self, line: str) -> Path:
        """A line's projection kept when a job could not sync back."""
        return self.ci_dir / f"unsynced-{line}.md"
