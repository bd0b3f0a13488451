"""`lifeline-mesh ci run` jobs against a node serving a large signed line, through the CLI.

    python bench/ci_jobs.py [--n 100000] [--sequential 20] [--concurrent 20]
                            [--sync-mode full|shallow] [--cache DIR] [--served ROOT]
                            [--tree TREE]

The served line is bench/full_sync.py's (n signed entries, built once and kept in
``--cache``), copied for this run so the runners' enrolments do not accumulate. The node
runs `lifeline-mesh serve` (mutual TLS, a join port, Prometheus metrics) with one CI
credential (unlimited uses). Each job is a real `lifeline-mesh ci run -- true` process in
a fresh folder, as on a fresh runner: it enrolls with the credential, pulls the line,
writes its context file, runs the command and syncs back. First ``--sequential`` jobs one
after another, then ``--concurrent`` at once. Prints per phase: job wall time (median,
p95), protocol bytes per job (the node's ``lifeline_protocol_bytes`` counters), the node's
CPU (serve and its helper processes) and RSS.

``--sync-mode``: ``full`` pulls the whole history (``ci run --full-history`` where `ci run`
has that option, else its only mode); ``shallow`` the current truth only (the default of a
`ci run` that has ``--full-history``; refused by a tree without it). ``--served ROOT``
serves a copy of that CA holder's root instead (e.g. bench/ci_shallow.py's line, whose
truth is ~0.2% of it, kept under ``$LIFELINE_BENCH_CACHE``). ``--tree TREE`` runs `serve`
and the jobs with that checkout's code (e.g. a `git worktree` of main; run the script once
per tree, alternating, for a side-by-side). Prints figures; not a test.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from full_sync import HERE, TREE, _cpu_s, build
from memory import rss

from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.membership.credential import CredentialSpec, issue_credential


def _env(tree: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(tree)}


def _mode_args(mode: str, tree: Path) -> list[str]:
    help_text = subprocess.run(
        [sys.executable, "-m", "lifeline_mesh", "ci", "run", "--help"],
        capture_output=True,
        text=True,
        check=True,
        env=_env(tree),
        cwd=tree,  # `-m` looks in the working folder first
    ).stdout
    has_shallow = "--full-history" in help_text
    if mode == "full":
        return ["--full-history"] if has_shallow else []
    if not has_shallow:
        raise SystemExit("this tree's `ci run` has no shallow sync; use --sync-mode full")
    return []


def _serve(root: Path, tree: Path) -> tuple[subprocess.Popen[str], dict[str, str]]:
    argv = [sys.executable, "-m", "lifeline_mesh", "--root", str(root), "serve", "--no-discovery"]
    argv += ["--listen", "127.0.0.1:0", "--join-listen", "127.0.0.1:0"]
    argv += ["--metrics-listen", "127.0.0.1:0"]
    proc = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=_env(tree),
        cwd=tree,
        start_new_session=True,
    )
    assert proc.stdout is not None
    said: dict[str, str] = {}
    for prefix in ("listening on", "join port on", "metrics on"):
        line = proc.stdout.readline()
        found = re.match(r"(listening on|join port on|metrics on) (\S+)", line)
        if found is None:
            proc.kill()
            raise SystemExit(f"serve did not start: {line!r}")
        said[found[1]] = found[2]
        del prefix
    return proc, said


def _bytes(metrics: str) -> int:
    """Protocol bytes both ways the node has counted so far."""
    with urllib.request.urlopen(f"http://{metrics}/metrics", timeout=30) as reply:
        text = reply.read().decode()
    return sum(
        int(float(m[1]))
        for m in re.finditer(r"^lifeline_protocol_bytes_total\{[^}]*\} (\S+)", text, re.M)
    )


def _job(work: Path, token: str, extra: list[str], tree: Path) -> subprocess.Popen[bytes]:
    work.mkdir(parents=True)
    argv = [sys.executable, "-m", "lifeline_mesh", "--root", str(work), "ci", "run", *extra]
    return subprocess.Popen(
        [*argv, "--", "true"],
        cwd=work,
        env={**_env(tree), "LIFELINE_MESH_TOKEN": token},
        stdout=subprocess.DEVNULL,
        stderr=(work.parent / f"{work.name}.log").open("w"),
    )


def _wait_all(jobs: list[subprocess.Popen[bytes]], started: float) -> list[float]:
    """Each job's wall time from ``started`` (polled: a job that ends first is seen first)."""
    walls: dict[int, float] = {}
    while len(walls) < len(jobs):
        for k, job in enumerate(jobs):
            if k not in walls and job.poll() is not None:
                if job.returncode != 0:
                    work = Path(str(job.args[4]))  # type: ignore[index]
                    log = work.parent / f"{work.name}.log"
                    raise SystemExit(f"a job failed: {log.read_text()[-1500:]}")
                walls[k] = time.monotonic() - started
        time.sleep(0.05)
    return [walls[k] for k in range(len(jobs))]


def _phase(label: str, walls: list[float], sent: int, cpu: float, pid: int, whole: float) -> None:
    walls = sorted(walls)
    p95 = walls[max(0, round(0.95 * len(walls)) - 1)]
    now, peak = rss(pid)
    print(
        f"{label}: {len(walls)} jobs in {whole:.1f} s; job median {statistics.median(walls):.2f} s,"
        f" p95 {p95:.2f} s; protocol bytes per job {sent / len(walls):,.0f}; node CPU "
        f"{cpu:.1f} s ({cpu / len(walls):.2f} s a job); node RSS {now} MB, peak {peak} MB "
        f"(load {' '.join(Path('/proc/loadavg').read_text().split()[:3])})",
        flush=True,
    )


def run(args: argparse.Namespace, tmp: Path) -> None:
    served = args.served or build(args.cache, args.n)[0]
    hub = tmp / "hub"
    shutil.copytree(served, hub)
    tree = args.tree.resolve()
    extra = _mode_args(args.sync_mode, tree)
    proc, said = _serve(hub, tree)
    try:
        spec = CredentialSpec(
            "bench",
            lines=("ledger",),
            addresses=(said["join port on"],),
            sync_addresses=(said["listening on"],),
        )
        token = issue_credential(NodeHome(hub), spec).encode()
        metrics = said["metrics on"].removeprefix("http://").split("/")[0]
        print(
            f"tree {tree}: node serving {served.name}; sync mode {args.sync_mode} "
            f"({' '.join(extra) or 'no option'}); RSS {rss(proc.pid)[0]} MB",
            flush=True,
        )
        walls: list[float] = []
        cpu0, bytes0, began = _cpu_s(proc.pid), _bytes(metrics), time.monotonic()
        for k in range(args.sequential):
            started = time.monotonic()
            walls += _wait_all([_job(tmp / f"seq{k}", token, extra, tree)], started)
        _phase(
            "sequential",
            walls,
            _bytes(metrics) - bytes0,
            _cpu_s(proc.pid) - cpu0,
            proc.pid,
            time.monotonic() - began,
        )
        cpu0, bytes0, began = _cpu_s(proc.pid), _bytes(metrics), time.monotonic()
        jobs = [_job(tmp / f"con{k}", token, extra, tree) for k in range(args.concurrent)]
        walls = _wait_all(jobs, began)
        _phase(
            "concurrent",
            walls,
            _bytes(metrics) - bytes0,
            _cpu_s(proc.pid) - cpu0,
            proc.pid,
            time.monotonic() - began,
        )
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=300)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--sequential", type=int, default=20)
    parser.add_argument("--concurrent", type=int, default=20)
    parser.add_argument("--sync-mode", choices=["full", "shallow"], default="full")
    parser.add_argument("--cache", type=Path, default=HERE / "out" / "full_sync")
    parser.add_argument("--served", type=Path, default=None, help="serve a copy of this root")
    parser.add_argument("--tree", type=Path, default=TREE, help="the checkout to run")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        run(args, Path(tmp))


if __name__ == "__main__":
    main()
