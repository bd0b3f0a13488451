"""Full initial sync through the CLI, mutual TLS and the notary on (DESIGN §10: ≥ 20k/s).

    python bench/full_sync.py [--n 100000,1000000] [--runs 3] [--baseline TREE]
                              [--cache DIR] [--profile DIR [--sample cpu|gil|native]]
                              [--pullers K]

A mesh's CA holder holds a line of n signed entries (~600 bytes each, a chain of notes,
each with its author attestation, written 10,000 at a time and so sealed: decision 0149)
and runs `lifeline-mesh serve` (mutual TLS, its own process). A second node, joined to the
mesh with the real `invite` and `join`, starts with an empty line and pulls it with
`lifeline-mesh sync ADDRESS --json` as a user runs it: every entry's id checked at
admission, every author signature by itself or by its seal, a state statement signed
when the session ends. Prints, per run: wall time of the `sync` process, entries/s, its
peak RSS (the process itself, from wait4), the serving process's CPU during the sync, the
in-sync check after it, and what the `sync` process read and wrote through the kernel
(its WAL, checkpoints and page-cache misses: /proc's rchar and wchar, sampled until it exits).

The nodes (serve and sync) run the code of this tree, or, with ``--baseline TREE``, of
both trees alternating run by run (``PYTHONPATH=TREE``), so the two are measured side by
side in one window. The served line and the joined node are built once per n and kept in
``--cache`` (default ``bench/out/full_sync``), as a million signed entries take minutes.
``--profile DIR`` runs this tree's `sync` and `serve` under py-spy (``pip install py-spy``; one
run, slower) and writes their collapsed stacks, every thread and helper process, to
``sync.txt`` and ``serve.txt`` there: on-CPU samples (``--sample cpu``, the default), only
the threads holding the interpreter lock (``gil``), or with SQLite's and libc's own frames
(``native``, which pauses the process at each sample: slower still). ``bench/profile_stages.py``
sorts a ``cpu`` or ``gil`` file by stage. ``--pullers K`` starts K such pulls at once, each
into its own copy of the joined node (the serving side sees K sessions of one member), and
prints the wall time of the last to finish and the serving process's peak RSS and CPU: what
new nodes joining together cost the node they pull from. Prints figures; not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from memory import Sampler, rss

from lifeline.entry import Entry, format_ts
from lifeline.home import Home
from lifeline.store.sqlite import SqliteStore
from lifeline_mesh.home.config import NodeConfig
from lifeline_mesh.home.identity import NodeIdentity
from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.membership.ca import create_mesh
from lifeline_mesh.notary.sign import sign_entries

HERE = Path(__file__).resolve().parent
TREE = HERE.parent
BATCH = 10_000
# What a cached line is: its writes sealed (decision 0149); a line cached before is built again
READY = "ok, sealed\n"


async def _fill_signed(root: Path, n: int) -> None:
    identity, _ = NodeIdentity.load_or_create(NodeHome(root))
    path = Home(root).line_path("ledger")
    path.parent.mkdir(parents=True, exist_ok=True)
    base = time.time() - n
    prev: str | None = None
    async with await SqliteStore.open(path) as store:
        for start in range(0, n, BATCH):
            batch = []
            for k in range(start, min(n, start + BATCH)):
                e = Entry.create(
                    ts=format_ts(datetime.fromtimestamp(base + k, UTC)),
                    kind="note",
                    summary=f"entry {k}",
                    body=f"{k} " + "lorem ipsum " * 40,
                    parents=(prev,) if prev and k % 5000 else (),
                )
                batch.append(e)
                prev = e.id
            await store.append_many(batch)
            await sign_entries(store, identity, batch)


def _cli(root: Path, *args: str) -> str:
    out = subprocess.run(
        [sys.executable, "-m", "lifeline_mesh", "--root", str(root), *args],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if out.returncode != 0:
        raise SystemExit(f"lifeline-mesh {' '.join(args)} failed: {out.stderr}")
    return out.stdout


def _serve(root: Path, env: dict[str, str], wrap: list[str]) -> tuple[subprocess.Popen[str], str]:
    argv = [*wrap, sys.executable, "-m", "lifeline_mesh", "--root", str(root), "serve"]
    argv += ["--listen", "127.0.0.1:0", "--join-listen", "127.0.0.1:0", "--no-discovery"]
    proc = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
        start_new_session=True,
    )
    assert proc.stdout is not None
    first = proc.stdout.readline()
    while first.startswith("py-spy>") or first == "\n":  # its own notice, when profiling
        first = proc.stdout.readline()
    if not first.startswith("listening on"):
        proc.kill()
        raise SystemExit(f"serve did not start: {first!r}")
    proc.stdout.readline()  # the join port
    return proc, first.removeprefix("listening on ").strip()


def build(cache: Path, n: int) -> tuple[Path, Path]:
    """The served CA holder and the joined puller for ``n`` (built once, then reused)."""
    base = cache / str(n)
    served, puller = base / "served", base / "puller"
    ready = base / "ready"
    if ready.exists() and ready.read_text() == READY:
        _fold(served)
        return served, puller
    shutil.rmtree(base, ignore_errors=True)
    served.mkdir(parents=True)
    puller.mkdir()
    started = time.monotonic()
    create_mesh(NodeHome(served), "bench")
    NodeConfig(shared_lines=["ledger"]).save(NodeHome(served))
    asyncio.run(_fill_signed(served, n))
    print(f"built {n:,} signed entries in {time.monotonic() - started:.0f} s", flush=True)
    proc, _ = _serve(served, {**os.environ, "PYTHONPATH": str(TREE)}, [])
    try:
        join = json.loads(_cli(served, "invite", "--json"))
        token = join["token"]
        joins = _join_address(served)
        _cli(puller, "join", token, "--peer", joins)
    finally:
        proc.terminate()
        proc.communicate(timeout=120)
    NodeConfig(shared_lines=["ledger"]).save(NodeHome(puller))
    _fold(served)
    ready.write_text(READY)
    return served, puller


def _fold(served: Path) -> None:
    """The served line's truth and recall index brought up to date, as on a node that
    serves it (`serve` folds them after a large load and when it starts, decision 0103):
    the first run measures the sync, not a fold running beside it."""
    for command in (["context"], ["recall", "fold"]):  # each folds what it reads
        subprocess.run(
            [sys.executable, "-m", "lifeline", "--root", str(served), *command],
            env={**os.environ, "PYTHONPATH": str(TREE)},
            stdout=subprocess.DEVNULL,
            timeout=600,
            check=True,
        )


def _join_address(served: Path) -> str:
    """A join port of its own (`membership-serve`), as `serve`'s was not kept."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "lifeline_mesh",
            "--root",
            str(served),
            "membership-serve",
            "--listen",
            "127.0.0.1:0",
            "--mtls-listen",
            "127.0.0.1:0",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdout is not None
    ports = json.loads(proc.stdout.readline())
    _MEMBERSHIP.append(proc)
    return f"127.0.0.1:{ports['join_port']}"


_MEMBERSHIP: list[subprocess.Popen[str]] = []


def _cpu_s(pid: int) -> float:
    """CPU seconds of ``pid`` and of its children still running (helper processes)."""
    total = 0.0
    tick = os.sysconf("SC_CLK_TCK")
    pids = [pid]
    for task in Path(f"/proc/{pid}/task").iterdir():
        pids += [int(c) for c in (task / "children").read_text().split()]
    for p in pids:
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / tick
    return total


class _IoWatch:
    """The last of a process's /proc I/O counters (bytes through read and write calls, page
    cache included), read every half second until it exits (its own, not its helpers')."""

    def __init__(self, pid: int) -> None:
        self.last: dict[str, int] = {}
        self._path = Path(f"/proc/{pid}/io")
        self.stop = Sampler(self._read, 0.5).stop

    def _read(self) -> None:
        text = self._path.read_text()
        self.last = {k: int(v) for k, v in (line.split(": ") for line in text.splitlines())}


SAMPLES = {  # what py-spy records (decision 0148 used all three)
    "cpu": ["--nonblocking"],  # on-CPU samples of every thread
    "gil": ["--nonblocking", "--gil"],  # only the thread holding the interpreter lock
    "native": ["--native"],  # C frames too (SQLite, libc); cannot run non-blocking
}


def _spy(folder: Path, name: str, sample: str = "cpu") -> list[str]:
    """py-spy (when installed beside this interpreter): every thread and helper process,
    as collapsed stacks (`folder/name.txt`), sampled as ``SAMPLES[sample]`` says."""
    spy = Path(sys.executable).with_name("py-spy")
    out = str(folder / f"{name}.txt")
    return [str(spy), "record", "-o", out, "-f", "raw", "-r", "50", "-t", *SAMPLES[sample], "--"]


def _without_spy(lines: list[bytes]) -> list[bytes]:
    return [line for line in lines if not line.startswith(b"py-spy>")]


def one_run(
    served: Path, template: Path, tree: Path, tmp: Path, profile: Path | None, sample: str = "cpu"
) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    puller = tmp / "puller"
    shutil.rmtree(puller, ignore_errors=True)
    shutil.copytree(template, puller)
    for leftover in Home(puller).line_path("ledger").parent.glob("ledger.db*"):
        leftover.unlink()
    proc, address = _serve(served, env, _spy(profile, "serve", sample) if profile else [])
    try:
        cpu0 = _cpu_s(proc.pid)
        plain = [sys.executable, "-m", "lifeline_mesh", "--root", str(puller), "sync", address]
        plain.append("--json")
        argv = [*_spy(profile, "sync", sample), *plain] if profile else plain
        started = time.monotonic()
        with (tmp / "out").open("w+b") as out, (tmp / "err").open("w+b") as err:
            sync = subprocess.Popen(argv, stdout=out, stderr=err, env=env)
            io = _IoWatch(sync.pid)
            _, status, usage = os.wait4(sync.pid, 0)  # ru_maxrss: this process alone
            io.stop()
            sync.returncode = os.waitstatus_to_exitcode(status)
            wall = time.monotonic() - started
            out.seek(0)
            err.seek(0)
            stdout, stderr = out.read(), err.read()
        if sync.returncode != 0:
            raise SystemExit(f"sync failed: {stderr.decode()[-2000:]}")
        cpu = _cpu_s(proc.pid) - cpu0
        serve_peak = rss(proc.pid)[1]
        [report] = json.loads(b"\n".join(_without_spy(stdout.splitlines())))
        check = subprocess.run(plain, capture_output=True, env=env, check=True)
        [again] = json.loads(check.stdout)
    finally:
        if profile:  # py-spy leads the group: SIGINT stops it writing, and serve gracefully
            os.killpg(proc.pid, signal.SIGINT)
        else:
            proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=300)
    return {
        "wall": wall,
        "sync_peak": usage.ru_maxrss / 1024,
        "sync_cpu": usage.ru_utime + usage.ru_stime,  # with the helpers it waited for
        "sync_sys": usage.ru_stime,
        "sync_written": io.last.get("wchar", 0) / 1e9,  # through write(2): WAL, checkpoints
        "sync_read": io.last.get("rchar", 0) / 1e9,
        "received": report["entries_received"],
        "serve_cpu": cpu,
        "serve_peak": serve_peak,
        "check_rt": again["round_trips"],
        "check_out": again["bytes_sent"],
        "check_in": again["bytes_received"],
    }


def pulls_at_once(served: Path, template: Path, tree: Path, tmp: Path, k: int) -> dict[str, float]:
    """``k`` pulls into copies of the joined node at once, against one `serve`."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    homes = []
    for n in range(k):
        home = tmp / f"puller{n}"
        shutil.copytree(template, home)
        for leftover in Home(home).line_path("ledger").parent.glob("ledger.db*"):
            leftover.unlink()
        homes.append(home)
    proc, address = _serve(served, env, [])
    try:
        cpu0 = _cpu_s(proc.pid)
        started = time.monotonic()
        syncs = [
            subprocess.Popen(
                [sys.executable, "-m", "lifeline_mesh", "--root", str(h), "sync", address],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                env=env,
            )
            for h in homes
        ]
        peaks = []
        for sync in syncs:
            _, status, usage = os.wait4(sync.pid, 0)
            sync.returncode = os.waitstatus_to_exitcode(status)
            peaks.append(usage.ru_maxrss / 1024)
            if sync.returncode != 0:
                assert sync.stderr is not None
                raise SystemExit(f"sync failed: {sync.stderr.read().decode()[-2000:]}")
        wall = time.monotonic() - started
        cpu = _cpu_s(proc.pid) - cpu0
        serve_peak = rss(proc.pid)[1]
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=300)
    return {"wall": wall, "serve_cpu": cpu, "serve_peak": serve_peak, "sync_peak": max(peaks)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", default="100000", help="sizes, comma-separated")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--baseline", type=Path, help="another tree, measured alternating")
    parser.add_argument("--cache", type=Path, default=HERE / "out" / "full_sync")
    parser.add_argument("--profile", type=Path, help="profile one run of this tree")
    parser.add_argument(
        "--sample", choices=sorted(SAMPLES), default="cpu", help="what --profile records"
    )
    parser.add_argument("--pullers", type=int, default=1, help="pulls at once, against one serve")
    args = parser.parse_args()
    trees = [("this", TREE)] + ([("baseline", args.baseline.resolve())] if args.baseline else [])
    try:
        for n in (int(x) for x in args.n.split(",")):
            served, template = build(args.cache, n)
            if args.profile:
                args.profile.mkdir(parents=True, exist_ok=True)
                with tempfile.TemporaryDirectory() as tmp:
                    r = one_run(served, template, TREE, Path(tmp), args.profile, args.sample)
                print(f"profiled run: {r}")
                continue
            if args.pullers > 1:
                for k in range(args.runs):
                    for name, tree in trees if k % 2 == 0 else trees[::-1]:
                        with tempfile.TemporaryDirectory() as tmp:
                            r = pulls_at_once(served, template, tree, Path(tmp), args.pullers)
                        load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
                        print(
                            f"n={n:,} {name}: {args.pullers} pulls at once in {r['wall']:.1f} s, "
                            f"serve peak {r['serve_peak']} MB, serve CPU {r['serve_cpu']:.1f} s, "
                            f"sync peak {r['sync_peak']:.0f} MB (load {load})",
                            flush=True,
                        )
                continue
            results: dict[str, list[dict[str, float]]] = {name: [] for name, _ in trees}
            for k in range(args.runs):
                for name, tree in trees if k % 2 == 0 else trees[::-1]:
                    with tempfile.TemporaryDirectory() as tmp:
                        r = one_run(served, template, tree, Path(tmp), None)
                    results[name].append(r)
                    load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
                    print(
                        f"n={n:,} {name}: {r['wall']:.1f} s = {n / r['wall']:,.0f} entries/s, "
                        f"sync peak {r['sync_peak']:.0f} MB, sync CPU {r['sync_cpu']:.1f} s "
                        f"({r['sync_sys']:.1f} s in the kernel; wrote {r['sync_written']:.1f} GB, "
                        f"read {r['sync_read']:.1f} GB), "
                        f"serve CPU {r['serve_cpu']:.1f} s, "
                        f"serve peak {r['serve_peak']} MB; in-sync check {r['check_rt']:.0f} "
                        f"RT {r['check_out']:.0f} / {r['check_in']:.0f} B (load {load})",
                        flush=True,
                    )
            for name, rows in results.items():
                wall = statistics.median(r["wall"] for r in rows)
                peak = statistics.median(r["sync_peak"] for r in rows)
                cpu = statistics.median(r["sync_cpu"] + r["serve_cpu"] for r in rows)
                print(
                    f"n={n:,} {name}: median {wall:.1f} s = {n / wall:,.0f} entries/s, "
                    f"sync peak median {peak:.0f} MB, CPU of both sides median {cpu:.1f} s "
                    f"over {len(rows)} runs",
                    flush=True,
                )
    finally:
        for proc in _MEMBERSHIP:
            proc.terminate()
            proc.communicate(timeout=30)


if __name__ == "__main__":
    main()
