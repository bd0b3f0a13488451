"""`join -` reads the token from standard input, so it never shows in `ps`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.mesh_procs import cli


def join(root: Path, *args: str, stdin: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lifeline_mesh", "--root", str(root), "join", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_join_dash_reads_the_token_from_stdin(tmp_path: Path) -> None:
    ca, newcomer = tmp_path / "ca", tmp_path / "b"
    ca.mkdir()
    newcomer.mkdir()
    cli("lifeline_mesh", ca, "init", "--new-mesh", "team")
    proc = subprocess.Popen(
        [sys.executable, "-m", "lifeline_mesh", "--root", str(ca), "membership-serve"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        port = json.loads(proc.stdout.readline())["join_port"]
        token = json.loads(cli("lifeline_mesh", ca, "invite", "--json").stdout)["token"]
        done = join(newcomer, "-", "--peer", f"127.0.0.1:{port}", stdin=f"{token}\n")
    finally:
        proc.terminate()
        proc.communicate(timeout=30)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("joined mesh ")


def test_join_dash_with_nothing_on_stdin_is_one_line(tmp_path: Path) -> None:
    done = join(tmp_path, "-", stdin="")
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "no token" in done.stderr


def test_join_dash_refuses_a_flood_on_stdin(tmp_path: Path) -> None:
    done = join(tmp_path, "-", stdin="x" * 100_000)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "more than 4096 characters" in done.stderr
