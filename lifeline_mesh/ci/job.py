"""One CI job on the mesh: enroll, pull, export the context, run the command, sync back.

``lifeline-mesh ci run -- CMD…`` (and its two halves, ``ci start`` / ``ci finish``):

1. enroll an ephemeral node from ``$LIFELINE_MESH_TOKEN`` (a CI credential); a job that
   cannot enroll stops here, non-zero, before its command runs unsynced;
2. pull the credential's lines from the peer it names (or ``--peer``): shallow by default —
   each line's current truth, its signatures and tips, signed by the peer (decision 0063),
   ``--full-history`` for the whole line; a failed pull stops the job too — the agent
   would run without the team's context;
3. write each line's context to a file and name it in ``$LIFELINE_CONTEXT_FILE``;
4. run the command, with that variable set;
5. the session hook (:func:`ingest_sessions`): what ``lifeline sessions ingest`` does, in
   this process, so that the agents' sessions join the line before the sync;
6. sync back (a shallow line pushes what the job wrote; a full one syncs), twice before
   giving up; a failed sync is a warning, never a lost entry: the
   entries stay in the job's ``.lifeline/``, a projection of each line is written beside
   them, and the log says how to deliver both.

The exit status is the command's (2 when the job never got to run it).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from cryptography import x509

from lifeline.errors import ConfigError, LifelineError, PeerError
from lifeline.lines import validate_line_name
from lifeline.truth.budget import DEFAULT_BUDGET_CHARS, Budget
from lifeline.truth.formats import deliver
from lifeline.truth.service import build_context
from lifeline.wording import count
from lifeline_mesh.home.config import NodeConfig
from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.membership.certs import fingerprint, identity_from_cert, mesh_id_of
from lifeline_mesh.membership.invite import Token
from lifeline_mesh.membership.join import join
from lifeline_mesh.node.root import Node
from lifeline_mesh.node.shallow_join import push_lines, shallow_sync

__all__ = [
    "CONTEXT_ENV",
    "CiJob",
    "finish_job",
    "ingest_sessions",
    "run_command",
    "say_undelivered",
    "start_job",
]

CONTEXT_ENV = "LIFELINE_CONTEXT_FILE"
SYNC_ATTEMPTS = 2


@dataclass
class CiJob:
    home: NodeHome
    peer: str
    lines: list[str]
    node_id: str = ""
    counts: dict[str, int] = field(default_factory=dict)  # entries per line after the pull
    sync_bytes: int = 0  # protocol bytes both ways, pull and sync back (for bench/ci_fleet.py)

    @property
    def context_file(self) -> Path:
        return self.home.ci_context_path

    def save(self) -> None:
        self.home.ci_dir.mkdir(parents=True, exist_ok=True)
        rows = [self.peer, self.node_id, *(f"{n} {self.counts.get(n, 0)}" for n in self.lines)]
        self.home.ci_job_path.write_text("\n".join(rows) + "\n")

    @classmethod
    def load(cls, home: NodeHome) -> CiJob:
        """The job ``ci start`` recorded (peer and lines, for a later step of the same job)."""
        path = home.ci_job_path
        if not path.exists():
            raise ConfigError(
                f"no CI job was started in {home.root}; run `lifeline-mesh ci start` first"
            )
        peer, node_id, *rows = path.read_text().splitlines()
        counts = {name: int(n) for name, n in (row.split() for row in rows)}
        return cls(home, peer, list(counts), node_id, counts)


def _say(text: str) -> None:
    print(f"lifeline-mesh ci: {text}", file=sys.stderr, flush=True)


async def _count(home: NodeHome, line: str) -> int:
    async with home.open_line(line, create=True) as store:
        return await store.count()


async def start_job(
    home: NodeHome,
    token_text: str,
    peer: str | None,
    join_peer: str | None,
    *,
    shallow: bool = True,
) -> CiJob:
    """Enroll, pull the lines and write the context file; raises on anything that fails."""
    token = Token.decode(token_text)
    peer = peer or next(iter(token.sync_addresses), None)
    if peer is None:
        raise ConfigError(
            "the token names no peer to pull from; pass --peer HOST:PORT (a member's sync "
            "port), or mint the credential with `invite --ci NAME --sync-address HOST:PORT`"
        )
    lines = [validate_line_name(n) for n in token.lines] or ["ledger"]
    node_id = _enrolled_already(home, token)
    if node_id is None:
        joined = await join(home, token_text, join_peer)
        node_id = joined.node_id
        _say(f"enrolled {node_id} ({joined.role}) in mesh {joined.mesh_id}; {_expiry(home)}")
    else:
        _say(f"this workspace's runner {node_id} is still enrolled; {_expiry(home)}")
    config = NodeConfig.load(home)
    config.shared_lines = sorted({*config.shared_lines, *lines})
    config.save(home)
    for line in lines:
        async with home.open_line(line, create=True):  # `lifeline init` for each line
            pass
    job = CiJob(home, peer, lines, node_id)
    node = Node(home)
    pulled = await (shallow_sync(node, peer, lines) if shallow else node.sync(peer, lines))
    for report in pulled:
        got = count(report.entries_received, "entry", "entries")
        how = " in force (shallow: no history)" if report.role == "shallow" else ""
        wire = report.bytes_sent + report.bytes_received
        _say(f"pulled line {report.line!r} from {peer}: {got}{how} ({wire} bytes)")
        job.sync_bytes += report.bytes_sent + report.bytes_received
    job.counts = {line: await _count(home, line) for line in lines}
    await write_context(job)
    job.save()
    return job


# A kept runner must outlast the job it starts; one closer to its end enrolls anew.
REUSE_MARGIN = dt.timedelta(minutes=30)


def _enrolled_already(home: NodeHome, token: Token) -> str | None:
    """The runner node id of a workspace that ran a job of this credential's mesh before
    (a job run again, or ``.lifeline/`` kept between jobs) while its certificate lasts
    another :data:`REUSE_MARGIN`; None when the workspace has no mesh, or when its
    certificate is (nearly) expired: then the old certificate goes and the same node
    identity enrolls again. A workspace of another mesh is an error."""
    if not home.ca_cert_path.exists():
        return None
    ca = x509.load_pem_x509_certificate(home.ca_cert_path.read_bytes())
    if fingerprint(ca) != token.ca_fingerprint:
        raise ConfigError(
            f"{home.root} already belongs to mesh {mesh_id_of(ca)}, not to the mesh of this "
            "credential; run the job in a fresh workspace or remove its .lifeline/mesh/"
        )
    pem = home.tls_cert_path.read_bytes() if home.tls_cert_path.exists() else b""
    if pem:
        cert = x509.load_pem_x509_certificate(pem)
        if cert.not_valid_after_utc - dt.datetime.now(dt.UTC) > REUSE_MARGIN:
            return identity_from_cert(pem).node_id
    for path in (home.tls_cert_path, home.tls_key_path, home.ca_cert_path):
        path.unlink(missing_ok=True)  # expired: join fetches the CA again and a new cert
    return None


def _expiry(home: NodeHome) -> str:
    cert = x509.load_pem_x509_certificate(home.tls_cert_path.read_bytes())
    when = cert.not_valid_after_utc.strftime("%Y-%m-%dT%H:%M:%SZ")
    return f"its certificate expires at {when}"


def _lifeline(home: NodeHome, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "lifeline", "--root", str(home.root), *args]
    return subprocess.run(argv, capture_output=True, text=True, check=False)


async def write_context(job: CiJob) -> None:
    """Every line's context, one section per line, in the file ``$LIFELINE_CONTEXT_FILE``:
    what `lifeline context` prints, built here (a second interpreter and its imports cost
    a job about a second of CPU, several under a loaded runner: bench/history/ci-fleet.md)."""
    parts = []
    for line in job.lines:
        async with job.home.open_line(line, create=True) as store:
            ctx = await build_context(store, line=line, budget=Budget(DEFAULT_BUDGET_CHARS))
        text = deliver("markdown", ctx)
        parts.append(text if len(job.lines) == 1 else f"<!-- line {line} -->\n{text}")
    job.home.ci_dir.mkdir(parents=True, exist_ok=True)
    job.context_file.write_text("\n".join(parts))
    _say(f"context written to {job.context_file} (${CONTEXT_ENV})")


def run_command(job: CiJob, command: list[str]) -> int:
    """Run the job's command with the context exported; its exit status."""
    env = {**os.environ, CONTEXT_ENV: str(job.context_file), "LIFELINE_MESH_NODE_ID": job.node_id}
    env.pop("LIFELINE_MESH_TOKEN", None)  # the command needs the context, not the secret
    try:
        status = subprocess.run(command, env=env, check=False).returncode  # in our cwd
        return 128 - status if status < 0 else status  # killed by signal N: 128 + N, as sh
    except OSError as exc:
        _say(f"cannot run {command[0]!r}: {exc}")
        return 127


async def ingest_sessions(job: CiJob) -> None:
    """The hook for the job's agent sessions: what `lifeline --line LINE sessions ingest`
    does, for each line, in this process (a second interpreter and its imports cost a job
    seconds on a loaded runner: docs/benchmarks.md, "CI job on a large line")."""
    from lifeline.sessions.config import load_session_settings
    from lifeline.sessions.ingest.service import default_sources, ingest_sources, open_ingester
    from lifeline.sessions.scope import project_scope

    home = job.home
    try:
        settings = load_session_settings(home)
        found = default_sources()
        scope = project_scope(home.root)
        for line in job.lines:
            async with open_ingester(home, line, settings) as ingester:
                await ingest_sources(ingester, found, scope=scope)
    except (LifelineError, OSError) as exc:
        _say(f"warning: the agent sessions were not ingested: {exc}")


def say_undelivered(job: CiJob) -> None:
    """The one line for a job stopped (Ctrl-C) after its command started and before its
    sync back ended: what it wrote stays in its ``.lifeline/``, beside the job's record
    (:meth:`CiJob.save`), so `ci finish` there delivers it."""
    root = job.home.root.resolve()
    where = "" if root == Path.cwd().resolve() else f" --root {shlex.quote(str(root))}"
    _say(
        f"stopped before the sync back: what the job wrote is kept in {job.home.dir.resolve()}; "
        f"deliver it with `lifeline-mesh{where} ci finish`"
    )


async def finish_job(job: CiJob) -> bool:
    """Sync back; on failure keep everything and say how to deliver it. True if synced."""
    written = {line: await _count(job.home, line) - job.counts.get(line, 0) for line in job.lines}
    error: Exception | None = None
    for attempt in range(SYNC_ATTEMPTS):
        try:
            reports = await push_lines(Node(job.home), job.peer, job.lines)
        except (PeerError, ConfigError, OSError) as exc:
            error = exc
            if attempt + 1 < SYNC_ATTEMPTS:
                await asyncio.sleep(1.0)  # a retry after a restart of the peer, not a sync
            continue
        for report in reports:
            how = "pushed" if report.role == "push" else "synced"
            _say(
                f"{how} line {report.line!r} back to {job.peer}: {report.entries_sent} sent "
                f"({report.bytes_sent + report.bytes_received} bytes)"
            )
            job.sync_bytes += report.bytes_sent + report.bytes_received
        return True
    _warn_unsynced(job, written, error)
    return False


def _warn_unsynced(job: CiJob, written: dict[str, int], error: Exception | None) -> None:
    saved = []
    for line in job.lines:
        done = _lifeline(job.home, "--line", line, "render", "--stdout")
        if done.returncode == 0:
            path = job.home.ci_unsynced_path(line)
            path.write_text(done.stdout)
            saved.append(str(path))
    total = sum(written.values())
    folder = job.home.dir.resolve()
    _say(f"WARNING: sync back to {job.peer} failed: {error}")
    _say(
        f"WARNING: the {count(total, 'entry', 'entries')} this job wrote "
        f"{'is' if total == 1 else 'are'} NOT lost: {'it is' if total == 1 else 'they are'} "
        f"in {folder} "
        f"({', '.join(f'{n}: {c}' for n, c in written.items())}); projections: "
        f"{', '.join(saved) or 'none'}"
    )
    _say(
        f"to recover {'it' if total == 1 else 'them'}, keep {folder} (e.g. upload it as a job "
        "artifact) and run "
        f"`lifeline-mesh --root DIR sync {job.peer}` before {_expiry(job.home).split()[-1]}; "
        "or, later, on any member: `lifeline --line LINE ingest unsynced-LINE.md`"
    )
