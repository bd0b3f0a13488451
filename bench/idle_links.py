"""The CPU an idle mesh of real `serve` nodes costs, per node (decision 0138).

    python bench/idle_links.py [--nodes 5] [--seconds 60] [--baseline TREE]

Makes ``--nodes`` nodes of one mesh over mutual TLS (the first holds the CA), starts each
as `lifeline-mesh serve --no-discovery` with every other node as a static peer (so every
link carries a Watch call both ways), writes one entry and waits until it crossed, lets
the mesh settle 15 s, then reads each `serve` process's CPU time (user + system, from
/proc) over ``--seconds`` of idleness. With ``--baseline TREE`` the same runs, at the same
time, with the code of that tree (``PYTHONPATH``), so the two are measured side by side.
Figures, not pass/fail.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
TREE = HERE.parent

_ONE_MESH = r"""
import os, sys, tempfile, time
from contextlib import ExitStack
from pathlib import Path
from tests.support.mesh_procs import (
    free_port, join_mesh, log_note, serve, shared_node, wait_for_entry,
)

def cpu(pid):
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

nodes, seconds = int(sys.argv[1]), float(sys.argv[2])
tmp = Path(tempfile.mkdtemp(dir=sys.argv[3]))
roots = [tmp / f"n{i}" for i in range(nodes)]
files = {r: shared_node(r) for r in roots}
join_mesh(roots[0], roots[1:])
address = {r: f"127.0.0.1:{free_port()}" for r in roots}
with ExitStack() as stack:
    procs = [
        stack.enter_context(serve(
            r, "--listen", address[r], "--no-discovery",
            *[x for o in roots if o != r for x in ("--peer", address[o])],
        ))
        for r in roots
    ]
    first = log_note(roots[1], "first")
    for r in roots[2:]:
        wait_for_entry(files[r], first)
    time.sleep(15)
    before = [cpu(p.pid) for p in procs]
    time.sleep(seconds)
    after = [cpu(p.pid) for p in procs]
print(" ".join(f"{a - b:.2f}" for a, b in zip(after, before)))
"""


def _run(tree: Path, nodes: int, seconds: float, tmp: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    return subprocess.Popen(
        [sys.executable, "-c", _ONE_MESH, str(nodes), str(seconds), tmp],
        cwd=tree, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--baseline", type=Path, help="another tree, measured at the same time")
    args = parser.parse_args()
    trees = [("this", TREE)] + ([("baseline", args.baseline.resolve())] if args.baseline else [])
    with tempfile.TemporaryDirectory() as tmp:
        procs = [(name, _run(tree, args.nodes, args.seconds, tmp)) for name, tree in trees]
        for name, proc in procs:
            out, _ = proc.communicate()
            if proc.returncode != 0 or not out.strip():
                sys.exit(f"{name}: the mesh did not run (exit {proc.returncode})")
            per_node = [float(x) for x in out.split()]
            print(
                f"{name}: {args.nodes} nodes idle {args.seconds:g} s: CPU per node "
                f"median {statistics.median(per_node):.2f} s ({', '.join(out.split())})"
            )


if __name__ == "__main__":
    main()
