"""A CI fleet against one serving node: enrollment, pulls, membership growth, RSS.

    python bench/ci_fleet.py [--sequential 200] [--concurrent 20] [--entries 10000]
                             [--job-ttl 1m] [--simulated 500]

One CA holder serves a line of ``--entries`` entries (`lifeline-mesh serve`, its own
process). One CI credential (unlimited uses, runner certificates of ``--job-ttl``). Each job
is a process of its own, as on a CI runner: it enrolls a fresh node with the credential,
pulls the line, writes its context file, appends 5 signed entries and syncs back — the
`lifeline-mesh ci` code path (start_job / finish_job). First ``--sequential`` jobs one after
another, then ``--concurrent`` jobs at once. Prints, per phase: enrollment + first pull per
job (median, p95), the whole job, protocol bytes per job; then the members and the size of
the membership state the node sends every syncing peer, and the node's RSS.

``--simulated`` runs that many enrollments in-process through the real Join handler with a
clock that moves two hours per job (so earlier runners have expired), and prints the
membership state's size after 100, 500 and 1000 of them, against what it would be if every
runner stayed a member. Prints figures; not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from memory import fill, rss

from lifeline.home import Home
from lifeline.ledger import Draft, Ledger
from lifeline.store.sqlite import SqliteStore
from lifeline_mesh.ci.job import finish_job, start_job
from lifeline_mesh.home.config import NodeConfig
from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.membership.ca import create_mesh
from lifeline_mesh.membership.credential import CredentialSpec, issue_credential
from lifeline_mesh.membership.invite import parse_duration
from lifeline_mesh.membership.registry import Registry
from lifeline_mesh.notary.sign import append_hook_factory

HERE = Path(__file__).resolve().parent


async def one_job(root: Path, token: str) -> dict[str, float]:
    """What a CI job does (the `ci run` steps, without a command process in between)."""
    started = time.perf_counter()
    job = await start_job(NodeHome(root), token, None, None)
    enrolled = time.perf_counter()
    hook = append_hook_factory(Home(root))
    async with await SqliteStore.open(Home(root).line_path("ledger")) as store:
        ledger = Ledger(store, hooks=[hook] if hook else [])
        for n in range(5):
            await ledger.append(Draft(kind="note", summary=f"job finding {n}", agent="ci"))
    synced = await finish_job(job)
    return {
        "enroll_pull_s": enrolled - started,
        "job_s": time.perf_counter() - started,
        "bytes": job.sync_bytes,
        "synced": synced,
    }


def _job_process(work: Path, token: str) -> subprocess.Popen[str]:
    work.mkdir(parents=True)
    return subprocess.Popen(
        [sys.executable, str(HERE / "ci_fleet.py"), "--job", str(work)],
        env={**os.environ, "LIFELINE_MESH_TOKEN": token},
        stdout=subprocess.PIPE,
        stderr=(work / "job.log").open("w"),
        text=True,
    )


def _result(proc: subprocess.Popen[str]) -> dict[str, float]:
    out, _ = proc.communicate(timeout=600)
    if proc.returncode != 0:
        log = Path(str(proc.args[-1])) / "job.log"
        tail = log.read_text().strip().splitlines()[-1:] if log.exists() else []
        return {"failed": 1, "error": tail[0] if tail else f"exit {proc.returncode}"}  # type: ignore[dict-item]
    result: dict[str, float] = json.loads(out.splitlines()[-1])
    return result


def _report(label: str, everything: list[dict[str, float]], wall: float) -> None:
    """One line of figures for ``results`` (flushed: the run may be long and piped)."""
    results = [r for r in everything if "failed" not in r]
    for failed in (r for r in everything if "failed" in r):
        print(f"  a job failed: {failed['error']}", flush=True)
    if not results:
        return
    enroll = sorted(r["enroll_pull_s"] for r in results)
    jobs = sorted(r["job_s"] for r in results)
    p95 = enroll[max(0, round(0.95 * len(enroll)) - 1)]
    print(
        f"{label}: {len(results)} jobs in {wall:.1f}s; enroll + first pull median "
        f"{statistics.median(enroll):.2f}s, p95 {p95:.2f}s; whole job median "
        f"{statistics.median(jobs):.2f}s; protocol bytes per job median "
        f"{statistics.median(r['bytes'] for r in results):,.0f}; "
        f"{sum(1 for r in results if not r['synced'])} failed syncs",
        flush=True,
    )


def fleet(args: argparse.Namespace, tmp: Path) -> None:
    sys.path.insert(0, str(HERE.parent))
    from tests.mesh_procs import start_ca_serve  # the real serve, as the CI tests start it

    hub = tmp / "hub"
    create_mesh(NodeHome(hub), "fleet")
    asyncio.run(fill(Home(hub).line_path("ledger"), args.entries))
    NodeConfig(shared_lines=["ledger"]).save(NodeHome(hub))
    proc, sync, joins = start_ca_serve(hub, stderr=subprocess.DEVNULL)
    try:
        spec = CredentialSpec(
            "fleet",
            job_ttl=parse_duration(args.job_ttl),
            lines=("ledger",),
            addresses=(joins,),
            sync_addresses=(sync,),
        )
        token = issue_credential(NodeHome(hub), spec).encode()
        print(
            f"node serving {args.entries:,} entries; RSS {rss(proc.pid)[0]} MB before jobs",
            flush=True,
        )
        started, results = time.perf_counter(), []
        for n in range(args.sequential):
            results.append(_result(_job_process(tmp / f"seq{n}", token)))
            if (n + 1) % 25 == 0:  # progress, and figures that survive an interrupted run
                _report(f"  after {n + 1}", results, time.perf_counter() - started)
                print(f"    node RSS {rss(proc.pid)[0]} MB", flush=True)
        _report("sequential", results, time.perf_counter() - started)
        started = time.perf_counter()
        procs = [_job_process(tmp / f"con{n}", token) for n in range(args.concurrent)]
        _report("concurrent", [_result(p) for p in procs], time.perf_counter() - started)
        registry = Registry.load(NodeHome(hub))
        state = json.dumps(registry.to_json(), sort_keys=True)
        on_disk = NodeHome(hub).members_path.stat().st_size
        print(
            f"after {args.sequential + args.concurrent} jobs: {len(registry.members)} members, "
            f"{len(registry.retired)} retired rows; membership state sent to each syncing "
            f"peer {len(state):,} bytes (members.json {on_disk:,})"
        )
        with sqlite3.connect(Home(hub).line_path("ledger")) as conn:
            count, size = conn.execute(
                "SELECT count(*), coalesce(sum(length(item)), 0) FROM attestations"
                " WHERE role = 'enrolled'"
            ).fetchone()
        print(f"the line holds {count} runner enrollments ({size:,} bytes): one per writing job")
        now, peak = rss(proc.pid)
        print(f"node RSS {now} MB, peak {peak} MB")
    finally:
        proc.terminate()
        proc.communicate(timeout=60)


def simulated(n: int, tmp: Path) -> None:
    """``n`` enrollments through the real Join handler, two hours apart (1 h certificates);
    the membership state each syncing peer receives, at checkpoints along the way."""
    sys.path.insert(0, str(HERE.parent))
    from lifeline_mesh.membership.service import MembershipServicer
    from tests.test_ci_credentials import NOW, Clock, _request  # the test's request builder

    root = tmp / "sim"
    create_mesh(NodeHome(root), "sim", now=NOW)
    clock = Clock()
    service = MembershipServicer(NodeHome(root), clock)
    token = issue_credential(
        NodeHome(root), CredentialSpec("sim", job_ttl=dt.timedelta(hours=1)), NOW
    )
    kept = Registry.load(NodeHome(root))  # the same runners, had they stayed members
    checkpoints = sorted({c for c in (100, 500, 1000, n) if c <= n})
    started = time.perf_counter()
    for job in range(n):
        clock.now = NOW + job * dt.timedelta(hours=2)
        reply = service._join(_request(token, service.mesh_id)[0])
        kept.members.update(Registry.from_json(json.loads(reply.members_json)).members)
        if job + 1 in checkpoints:
            registry = Registry.load(NodeHome(root))
            size = len(json.dumps(registry.to_json(), sort_keys=True))
            grown = len(json.dumps(kept.to_json(), sort_keys=True))
            print(
                f"after {job + 1} simulated jobs: {len(registry.members)} members, "
                f"{len(registry.retired)} retired rows; membership state {size:,} bytes "
                f"(the Join reply carries {len(reply.members_json):,}); {grown:,} had every "
                "runner stayed a member",
                flush=True,
            )
    took = time.perf_counter() - started
    print(f"{took / n * 1000:.1f} ms per enrollment in-process (spend, sign, members list)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sequential", type=int, default=200)
    parser.add_argument("--concurrent", type=int, default=20)
    parser.add_argument("--entries", type=int, default=10_000)
    parser.add_argument("--job-ttl", default="1m", help="runner certificates (short: retire)")
    parser.add_argument("--simulated", type=int, default=500)
    parser.add_argument("--job", type=Path, help=argparse.SUPPRESS)  # one job, in this process
    args = parser.parse_args()
    if args.job:
        os.chdir(args.job)
        print(json.dumps(asyncio.run(one_job(args.job, os.environ["LIFELINE_MESH_TOKEN"]))))
        return
    with tempfile.TemporaryDirectory() as tmp:
        if args.simulated:
            simulated(args.simulated, Path(tmp))
        if args.sequential or args.concurrent:
            fleet(args, Path(tmp))


if __name__ == "__main__":
    main()
