"""One CI job on the mesh: enroll, pull, export the context, run the command, sync back.

``lifeline-mesh ci run -- CMD…`` (and its two halves, ``ci start`` / ``ci finish``):

1. enroll an ephemeral node from ``$LIFELINE_MESH_TOKEN`` (a CI credential); a job that
   cannot enroll stops here, non-zero, before its command runs unsynced;
2. pull the credential's lines from the peer it names (or ``--peer``); a failed pull stops
   the job too — the agent would run without the team's context;
3. write each line's context to a file and name it in ``$LIFELINE_CONTEXT_FILE``;
4. run the command, with that variable set;
5. the session hook (:func:`ingest_sessions`): where the ``lifeline`` in use has a
   ``sessions ingest`` command (agent-session ingestion), it is run here, so that the
   agents' sessions join the line before the sync; otherwise this step does nothing;
6. sync back, twice before giving up; a failed sync is a warning, never a lost entry: the
   entries stay in the job's ``.lifeline/``, a projection of each line is written beside
   them, and the log says how to deliver both.

The exit status is the command's (2 when the job never got to run it).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from cryptography import x509

from lifeline.errors import ConfigError, PeerError
from lifeline.lines import line_path, validate_line_name
from lifeline.store.sqlite import SqliteStore
from lifeline.truth.budget import DEFAULT_BUDGET_CHARS, Budget
from lifeline.truth.formats import deliver
from lifeline.truth.service import build_context
from lifeline_mesh.home.config import NodeConfig
from lifeline_mesh.membership import files
from lifeline_mesh.membership.invite import Token
from lifeline_mesh.membership.join import join
from lifeline_mesh.node.root import Node

__all__ = [
    "CONTEXT_ENV",
    "CiJob",
    "finish_job",
    "ingest_sessions",
    "run_command",
    "start_job",
]

CONTEXT_ENV = "LIFELINE_CONTEXT_FILE"
CONTEXT_FILE = "lifeline-context.md"  # under .lifeline/ci/
JOB_FILE = "job.txt"  # peer and lines, for `ci finish` in a later step of the same job
SYNC_ATTEMPTS = 2


@dataclass
class CiJob:
    root: Path
    peer: str
    lines: list[str]
    node_id: str = ""
    counts: dict[str, int] = field(default_factory=dict)  # entries per line after the pull
    sync_bytes: int = 0  # protocol bytes both ways, pull and sync back (for bench/ci_fleet.py)

    @property
    def folder(self) -> Path:
        return self.root / ".lifeline" / "ci"

    @property
    def context_file(self) -> Path:
        return self.folder / CONTEXT_FILE

    def save(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        rows = [self.peer, self.node_id, *(f"{n} {self.counts.get(n, 0)}" for n in self.lines)]
        (self.folder / JOB_FILE).write_text("\n".join(rows) + "\n")

    @classmethod
    def load(cls, root: Path) -> CiJob:
        path = root / ".lifeline" / "ci" / JOB_FILE
        if not path.exists():
            raise ConfigError(
                f"no CI job was started in {root}; run `lifeline-mesh ci start` first"
            )
        peer, node_id, *rows = path.read_text().splitlines()
        counts = {name: int(n) for name, n in (row.split() for row in rows)}
        return cls(root, peer, list(counts), node_id, counts)


def _say(text: str) -> None:
    print(f"lifeline-mesh ci: {text}", file=sys.stderr, flush=True)


async def _count(root: Path, line: str) -> int:
    store = await SqliteStore.open(line_path(root, line))
    try:
        return await store.count()
    finally:
        await store.close()


async def start_job(root: Path, token_text: str, peer: str | None, join_peer: str | None) -> CiJob:
    """Enroll, pull the lines and write the context file; raises on anything that fails."""
    token = Token.decode(token_text)
    peer = peer or next(iter(token.sync_addresses), None)
    if peer is None:
        raise ConfigError(
            "the token names no peer to pull from; pass --peer HOST:PORT (a member's sync "
            "port), or mint the credential with `invite --ci NAME --sync-address HOST:PORT`"
        )
    lines = [validate_line_name(n) for n in token.lines] or ["ledger"]
    joined = await join(root, token_text, join_peer)
    _say(f"enrolled {joined.node_id} ({joined.role}) in mesh {joined.mesh_id}; {_expiry(root)}")
    config = NodeConfig.load(root)
    config.shared_lines = sorted({*config.shared_lines, *lines})
    config.save(root)
    for line in lines:
        path = line_path(root, line)
        path.parent.mkdir(parents=True, exist_ok=True)
        await (await SqliteStore.open(path)).close()  # `lifeline init` for each line
    job = CiJob(root, peer, lines, joined.node_id)
    for report in await Node(root).sync(peer, lines):
        _say(f"pulled line {report.line!r} from {peer}: {report.entries_received} entries")
        job.sync_bytes += report.bytes_sent + report.bytes_received
    job.counts = {line: await _count(root, line) for line in lines}
    await write_context(job)
    job.save()
    return job


def _expiry(root: Path) -> str:
    cert = x509.load_pem_x509_certificate(files.path_of(root, files.TLS_CERT).read_bytes())
    when = cert.not_valid_after_utc.strftime("%Y-%m-%dT%H:%M:%SZ")
    return f"its certificate expires at {when}"


def _lifeline(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "lifeline", "--root", str(root), *args]
    return subprocess.run(argv, capture_output=True, text=True, check=False)


async def write_context(job: CiJob) -> None:
    """Every line's context, one section per line, in the file ``$LIFELINE_CONTEXT_FILE``:
    what `lifeline context` prints, built here (a second interpreter and its imports cost
    a job about a second of CPU, several under a loaded runner: docs/benchmarks.md)."""
    parts = []
    for line in job.lines:
        async with await SqliteStore.open(line_path(job.root, line)) as store:
            ctx = await build_context(store, line=line, budget=Budget(DEFAULT_BUDGET_CHARS))
        text = deliver("markdown", ctx)
        parts.append(text if len(job.lines) == 1 else f"<!-- line {line} -->\n{text}")
    job.folder.mkdir(parents=True, exist_ok=True)
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


def ingest_sessions(job: CiJob) -> None:
    """The hook for the job's agent sessions: ``lifeline sessions ingest`` if it exists."""
    if _lifeline(job.root, "sessions", "--help").returncode != 0:
        return  # this lifeline has no session ingestion: nothing to do
    for line in job.lines:
        done = _lifeline(job.root, "--line", line, "sessions", "ingest")
        if done.returncode != 0:
            _say(f"warning: `lifeline sessions ingest` failed on {line!r}: {done.stderr.strip()}")


async def finish_job(job: CiJob) -> bool:
    """Sync back; on failure keep everything and say how to deliver it. True if synced."""
    written = {line: await _count(job.root, line) - job.counts.get(line, 0) for line in job.lines}
    error: Exception | None = None
    for attempt in range(SYNC_ATTEMPTS):
        try:
            reports = await Node(job.root).sync(job.peer, job.lines)
        except (PeerError, ConfigError, OSError) as exc:
            error = exc
            if attempt + 1 < SYNC_ATTEMPTS:
                await asyncio.sleep(1.0)  # a retry after a restart of the peer, not a sync
            continue
        for report in reports:
            _say(f"synced line {report.line!r} back to {job.peer}: {report.entries_sent} sent")
            job.sync_bytes += report.bytes_sent + report.bytes_received
        return True
    _warn_unsynced(job, written, error)
    return False


def _warn_unsynced(job: CiJob, written: dict[str, int], error: Exception | None) -> None:
    saved = []
    for line in job.lines:
        done = _lifeline(job.root, "--line", line, "render", "--stdout")
        if done.returncode == 0:
            path = job.folder / f"unsynced-{line}.md"
            path.write_text(done.stdout)
            saved.append(str(path))
    total = sum(written.values())
    root = job.root.resolve()
    _say(f"WARNING: sync back to {job.peer} failed: {error}")
    _say(
        f"WARNING: the {total} entries this job wrote are NOT lost: they are in {root}/.lifeline "
        f"({', '.join(f'{n}: {c}' for n, c in written.items())}); projections: "
        f"{', '.join(saved) or 'none'}"
    )
    _say(
        f"to recover them, keep {root}/.lifeline (e.g. upload it as a job artifact) and run "
        f"`lifeline-mesh --root DIR sync {job.peer}` before {_expiry(job.root).split()[-1]}; "
        "or, later, on any member: `lifeline --line LINE ingest unsynced-LINE.md`"
    )
