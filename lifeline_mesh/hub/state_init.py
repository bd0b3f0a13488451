"""Make a root a process of a hub node whose identity and membership live in PostgreSQL.

``lifeline-mesh hub init --store URL`` (docs/hub.md, decision 0032). The first process made
on a database creates the hub node there (its signing key; with ``new_mesh``, a mesh whose
CA key is kept there too) or moves a laptop node's documents in (``source``); every later
one finds that node and becomes another process of it. Each root then holds only
``hub.json`` (which database) and its TLS credentials, issued here from the CA key in the
database, or copied from ``source`` when the CA key lives on a laptop.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
from dataclasses import dataclass, field
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from lifeline import fsutil
from lifeline.errors import ConfigError
from lifeline.line_source import hub_url
from lifeline.store.pg_lines import PgLines
from lifeline_mesh.home.identity import NodeIdentity
from lifeline_mesh.home.mesh_state import (
    CA_CERT,
    CA_KEY,
    DOCUMENTS,
    MEMBERS,
    NODE_KEY,
    FileState,
)
from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.home.pg_state import PgState, shown_url
from lifeline_mesh.membership.ca import MeshCA, create_mesh, make_csr, new_tls_key, pem_key
from lifeline_mesh.membership.certs import mesh_id_of
from lifeline_mesh.membership.registry import Registry
from lifeline_mesh.transport.authz import MeshRole

__all__ = ["HubInit", "init_hub"]


@dataclass
class HubInit:
    """What ``hub init`` did."""

    node_id: str
    store: str
    created: bool  # the hub node was made now (else this root joined an existing one)
    mesh_id: str | None = None
    imported: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)  # already in the database: left as is
    tls: str = "none"  # issued | copied | kept | none

    def to_dict(self) -> dict[str, object]:
        return {
            "node_id": self.node_id,
            "store": shown_url(self.store),
            "created": self.created,
            "mesh_id": self.mesh_id,
            "imported": self.imported,
            "kept": self.kept,
            "tls": self.tls,
        }


def init_hub(
    home: NodeHome,
    url: str,
    *,
    new_mesh: str | None = None,
    source: NodeHome | None = None,
    now: dt.datetime | None = None,
) -> HubInit:
    """Make ``home`` a process of the hub node in ``url`` (see the module docstring)."""
    if not home.root.is_dir():
        raise ConfigError(f"--root {home.root} is not a directory; pass the hub's folder")
    bound = hub_url(home.hub_binding_path)
    if bound is not None and bound != url:
        raise ConfigError(
            f"{home.root} is already a process of the hub in {shown_url(bound)}; use another "
            "--root for another database"
        )
    if source is not None and source.root.resolve() == home.root.resolve():
        raise ConfigError("--from names this root; move it with another --root for the hub")
    if bound is None and FileState(home).read(NODE_KEY) is not None:
        raise ConfigError(
            f"{home.root} has a node identity of its own ({home.key_path}); a hub process "
            "root holds only TLS credentials: use an empty folder, and `--from "
            f"{home.root}` to move this node into the database"
        )
    db = PgState.for_url(url)
    held = set(db.names())  # also: the database is reachable, or one clear line
    if new_mesh is not None and CA_CERT in held:
        raise ConfigError("the hub node already belongs to a mesh; drop --new-mesh")
    report = HubInit("", url, created=NODE_KEY not in held)
    if source is not None:
        _import(FileState(source), db, held, report)
    made = _made_paths(home)
    _bind(home, url)
    home = NodeHome(home.root, PgLines(url), db)  # this root is now the hub's process
    try:
        _set_up(home, db, report, held, new_mesh, source, now)
    except BaseException:
        if bound is None:  # refused: this root is left as it was, no hub.json behind
            _unbind(home, made)
        raise
    return report


def _set_up(
    home: NodeHome,
    db: PgState,
    report: HubInit,
    held: set[str],
    new_mesh: str | None,
    source: NodeHome | None,
    now: dt.datetime | None,
) -> None:
    """The bound root's node identity, mesh and TLS credentials (into ``report``)."""
    identity, _ = NodeIdentity.load_or_create(home)
    report.node_id = identity.node_id
    if new_mesh is not None:
        if CA_CERT in held or db.read(CA_CERT) is not None:
            raise ConfigError("the hub node already belongs to a mesh; drop --new-mesh")
        report.mesh_id = create_mesh(home, new_mesh, now).mesh_id  # CA cert and key in db
        report.tls = "issued"
    else:
        report.tls = _tls(home, db, identity, source, now or dt.datetime.now(dt.UTC))
    ca_pem = db.read(CA_CERT)
    if report.mesh_id is None and ca_pem is not None:
        report.mesh_id = mesh_id_of(x509.load_pem_x509_certificate(ca_pem))


def _made_paths(home: NodeHome) -> list[Path]:
    """The folders ``hub init`` would create in ``home`` (deepest first): removed again,
    when empty, if it is refused."""
    return [p for p in (home.mesh_dir, home.dir) if not p.exists()]


def _unbind(home: NodeHome, made: list[Path]) -> None:
    home.hub_binding_path.unlink(missing_ok=True)
    for folder in made:
        for leftover in (home.ignore_path,) if folder == home.dir else ():
            leftover.unlink(missing_ok=True)
        with contextlib.suppress(OSError):  # not empty: something else is there now
            folder.rmdir()


def _import(files: FileState, db: PgState, held: set[str], report: HubInit) -> None:
    """Move a laptop node's documents into the database: those it lacks; the node key must
    be the same node's when there is one already."""
    key = files.read(NODE_KEY)
    if key is None:
        raise ConfigError(f"--from {files.home.root} has no node identity to move")
    mine = NodeIdentity.from_text(key, files.where(NODE_KEY)).node_id
    there = db.read(NODE_KEY)
    if there is not None:
        theirs = NodeIdentity.from_text(there, db.where(NODE_KEY)).node_id
        if theirs != mine:
            raise ConfigError(
                f"the database already holds hub node {theirs}, not {mine} of --from; use an "
                "empty database to move a node in"
            )
    with db.exclusive():
        for name in DOCUMENTS:
            data = files.read(name)
            if data is None:
                continue
            if name in held:
                report.kept.append(name)
            else:
                db.write(name, data)
                report.imported.append(name)
    report.created = False


def _bind(home: NodeHome, url: str) -> None:
    path = home.hub_binding_path
    home.prepare()  # .lifeline/ its owner's only (mkdir's mode covers only the last folder)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    text = json.dumps({"store": url}, indent=2) + "\n"
    fsutil.write_atomic(path, text.encode(), mode=0o600)  # the URL may hold a password


def _tls(
    home: NodeHome,
    db: PgState,
    identity: NodeIdentity,
    source: NodeHome | None,
    now: dt.datetime,
) -> str:
    """This process's TLS credentials: kept, issued from the CA key in the database, or
    copied from ``source``."""
    ca_pem = db.read(CA_CERT)
    if ca_pem is None:
        return "none"  # not in a mesh: the hub serves --insecure (behind a proxy)
    if home.tls_cert_path.exists() and home.tls_key_path.exists():
        if not home.ca_cert_path.exists():
            fsutil.write_atomic(home.ca_cert_path, ca_pem, mode=0o644)
        return "kept"
    ca_key = db.read(CA_KEY)
    if ca_key is not None:
        key = serialization.load_pem_private_key(ca_key, password=None)
        if not isinstance(key, ec.EllipticCurvePrivateKey):
            raise ConfigError(f"{db.where(CA_KEY)} is not a P-256 key; restore it from backup")
        ca = MeshCA(key, x509.load_pem_x509_certificate(ca_pem))
        tls_key = new_tls_key()
        role = _role(home, identity.node_id)
        csr = make_csr(tls_key, identity.node_id)  # the CA key is here: its holder's mark
        cert = ca.issue(csr, identity.node_id, role, now, ca_holder=True)
        _write(home, pem_key(tls_key), cert.public_bytes(serialization.Encoding.PEM), ca_pem)
        return "issued"
    if source is not None and source.tls_key_path.exists():
        _write(
            home,
            fsutil.read_private(source.tls_key_path),
            source.tls_cert_path.read_bytes(),
            ca_pem,
        )
        return "copied"
    raise ConfigError(
        "the mesh CA key is not in the database (the hub joined a mesh made elsewhere): copy "
        f"tls.pem and tls.key from the first hub process's .lifeline/mesh/ into {home.mesh_dir}"
        " (`mkdir -p` it: a refused init leaves nothing behind), then run this again"
    )


def _role(home: NodeHome, node_id: str) -> MeshRole:
    if home.documents.read(MEMBERS) is None:
        return MeshRole.MEMBER
    member = Registry.load(home).members.get(node_id)
    return member.role if member is not None else MeshRole.MEMBER


def _write(home: NodeHome, key_pem: bytes, cert_pem: bytes, ca_pem: bytes) -> None:
    home.mesh_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    fsutil.write_atomic(home.tls_key_path, key_pem, mode=0o600)
    fsutil.write_atomic(home.tls_cert_path, cert_pem, mode=0o644)
    fsutil.write_atomic(home.ca_cert_path, ca_pem, mode=0o644)  # last: marks it in the mesh
