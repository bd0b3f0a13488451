"""How long the commands a hook, a script or an agent runs take to start and finish on a
small project: a whole process each, interpreter start included.

    python bench/cli_start.py [--runs 15] [--baseline TREE]

Makes a project holding a new mesh (so `lifeline log` signs), then
times each command ``--runs`` times (median and fastest wall time), alternating with the
code of ``--baseline TREE`` (``PYTHONPATH``) when given, so the two are measured side by
side. Figures, not pass/fail.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
TREE = HERE.parent

COMMANDS = [
    ("lifeline", "log", "--kind", "note", "--summary", "a note"),
    ("lifeline", "context"),
    ("lifeline_mesh", "id"),
    ("lifeline_mesh", "share", "ledger"),
    ("lifeline_mesh", "members"),
    ("lifeline_mesh", "verify"),
    ("lifeline_mesh", "sync", "--help"),
]


def _run(tree: Path, root: Path, module: str, *args: str) -> float:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    began = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", module, "--root", str(root), *args],
        env=env, check=True, capture_output=True,
    )  # fmt: skip
    return time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--baseline", type=Path, help="another tree, measured alternating")
    args = parser.parse_args()
    trees = [("this", TREE)] + ([("baseline", args.baseline.resolve())] if args.baseline else [])
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "project"
        root.mkdir()
        for command in (("lifeline", "init"), ("lifeline_mesh", "init", "--new-mesh", "bench")):
            _run(TREE, root, *command)
        times: dict[tuple[str, int], list[float]] = {}
        for _ in range(args.runs):
            for n, command in enumerate(COMMANDS):
                for name, tree in trees:
                    times.setdefault((name, n), []).append(_run(tree, root, *command))
    for n, command in enumerate(COMMANDS):
        program = "lifeline-mesh" if command[0] == "lifeline_mesh" else "lifeline"
        shown = " ".join((program, *command[1:]))
        cells = [
            f"{name} {statistics.median(times[(name, n)]) * 1000:.0f} ms "
            f"(fastest {min(times[(name, n)]) * 1000:.0f})"
            for name, _ in trees
        ]
        print(f"{shown:42} " + "   ".join(cells))


if __name__ == "__main__":
    main()
