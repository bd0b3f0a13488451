"""`lifeline-mesh ci` against a real serving node: enroll, pull, context, run, sync back;
fail fast; a failed sync keeps every entry; racing jobs; a revoked credential ends runners."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.ci_helpers import BIN_PATH, LIFELINE, MESH, Hub, job, stop
from tests.support.mesh_procs import cli, has_entry

AGENT = (
    'grep -q "Payments use Postgres" "$LIFELINE_CONTEXT_FILE" && '
    'test -z "${LIFELINE_MESH_TOKEN:-}" && '
    'lifeline log --kind test --summary "CI: the suite passes" --agent ci && exit 3'
)


def test_ci_run_enrolls_pulls_runs_syncs_back_and_exits_with_the_commands_status(
    hub: Hub, tmp_path: Path
) -> None:
    token = hub.credential("gha")
    done = job(tmp_path / "job", token, "ci", "run", "--", "sh", "-c", AGENT)
    assert done.returncode == 3, done.stderr  # the command's status, after the sync
    assert "enrolled" in done.stderr and "synced line 'ledger' back" in done.stderr
    context = tmp_path / "job" / ".lifeline" / "ci" / "lifeline-context.md"
    assert "Payments use Postgres" in context.read_text()
    history = cli("lifeline", hub.root, "history", "--json").stdout
    assert "CI: the suite passes" in history
    members = json.loads(cli("lifeline_mesh", hub.root, "members", "--json").stdout)["members"]
    runners = [m for m in members if m.get("credential") == "gha"]
    assert len(runners) == 1 and runners[0]["expires_at"] is not None
    rows = json.loads(cli("lifeline_mesh", hub.root, "credentials", "--json").stdout)
    assert [(r["name"], r["used"], r["runners"]) for r in rows] == [("gha", 1, 1)]
    verified = cli("lifeline_mesh", hub.root, "verify", check=False)
    assert verified.returncode == 0 and "unknown-signer" not in verified.stdout, verified.stdout
    signed = json.loads(cli("lifeline_mesh", hub.root, "verify", "--json").stdout)
    assert signed["lines"][0]["signed"] >= 1  # the runner's entry, signed by the runner


def test_a_job_that_cannot_enroll_fails_fast_without_running(hub: Hub, tmp_path: Path) -> None:
    token = hub.credential("once", "--uses", "1")
    assert job(tmp_path / "a", token, "ci", "run", "--", "true").returncode == 0
    marker = tmp_path / "ran"
    done = job(tmp_path / "b", token, "ci", "run", "--", "touch", str(marker))
    assert done.returncode == 2 and not marker.exists()
    assert done.stderr.strip().count("\n") == 0  # one line
    assert "CI credential 'once' refused: exhausted (all 1 uses spent)" in done.stderr
    done = job(tmp_path / "c", "lm1_AgBroken", "ci", "run", "--", "touch", str(marker))
    assert done.returncode == 2 and not marker.exists() and "damaged" in done.stderr


def test_a_failed_sync_back_warns_and_keeps_every_entry(hub: Hub, tmp_path: Path) -> None:
    token = hub.credential("gitlab")
    workdir = tmp_path / "job"
    assert job(workdir, token, "ci", "start").returncode == 0
    entry = subprocess.run(
        [*LIFELINE, "log", "--kind", "test", "--summary", "written while the hub is down"],
        cwd=workdir,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    stop(hub.proc)
    done = job(workdir, token, "ci", "finish")
    assert done.returncode == 0, done.stderr
    assert (
        "WARNING: sync back to" in done.stderr
        and "the 1 entry this job wrote is NOT lost: it is in" in done.stderr
    )
    assert "ledger: 1" in done.stderr and f"sync {hub.sync}" in done.stderr
    assert has_entry(workdir / ".lifeline" / "ledger.db", entry)
    projection = workdir / ".lifeline" / "ci" / "unsynced-ledger.md"
    assert "written while the hub is down" in projection.read_text()
    assert not has_entry(hub.line_file, entry)


@pytest.mark.slow
def test_racing_jobs_never_enroll_beyond_uses(hub: Hub, tmp_path: Path) -> None:
    token = hub.credential("racy", "--uses", "3")
    env = {**os.environ, "LIFELINE_MESH_TOKEN": token}
    procs = []
    for n in range(6):
        (tmp_path / f"j{n}").mkdir()
        procs.append(
            subprocess.Popen(
                [*MESH, "ci", "start"],
                cwd=tmp_path / f"j{n}",
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    results = [(p.wait(timeout=120), p.communicate()[1]) for p in procs]
    assert sorted(code for code, _ in results) == [0, 0, 0, 2, 2, 2], results
    assert all("exhausted (all 3 uses spent)" in err for code, err in results if code)


def test_revoking_the_credential_ends_its_runners(hub: Hub, tmp_path: Path) -> None:
    token = hub.credential("leaked")
    workdir = tmp_path / "job"
    assert job(workdir, token, "ci", "start").returncode == 0
    out = cli("lifeline_mesh", hub.root, "credentials", "revoke", "leaked", "--json").stdout
    assert len(json.loads(out)["runners_revoked"]) == 1
    refused = job(workdir, token, "sync", hub.sync)
    assert refused.returncode == 2 and "revoked at" in refused.stderr
    again = job(tmp_path / "next", token, "ci", "run", "--", "true")
    assert again.returncode == 2 and "'leaked' refused: revoked at" in again.stderr
    members = cli("lifeline_mesh", hub.root, "members").stdout
    assert "revoked since" in members and "CI runner (leaked)" in members


def test_the_job_s_command_cannot_read_the_credential_in_its_parent(
    hub: Hub, tmp_path: Path
) -> None:
    """The command runs as the job's user and may read ``/proc/PPID/environ``: `ci run`
    ran itself again with the reusable credential out of its environment (was: there for
    the whole job, whatever the command's own environment said)."""
    token = hub.credential("gha")
    seen = tmp_path / "parent"
    peek = (
        f'tr "\\0" "\\n" < /proc/$PPID/environ > {seen}.env; cat /proc/$PPID/cmdline > {seen}.cmd'
    )
    done = job(tmp_path / "job", token, "ci", "run", "--", "sh", "-c", peek)
    assert done.returncode == 0, done.stderr
    assert "synced line 'ledger' back" in done.stderr  # the job used the credential
    environ = Path(f"{seen}.env").read_text()
    assert "LIFELINE_MESH_TOKEN_FD=" in environ  # the `ci run` process it read
    assert token not in environ and "LIFELINE_MESH_TOKEN=" not in environ
    assert token not in Path(f"{seen}.cmd").read_text()


# Run by the job's command: looks for a text in the memory of its parent, `ci run`.
PEEK_MEMORY = r"""
import os, re, sys
needle, out = sys.argv[1].encode(), sys.argv[2]
proc = f"/proc/{os.getppid()}"
try:
    with open(f"{proc}/maps") as maps, open(f"{proc}/mem", "rb", 0) as mem:
        found = 0
        for row in maps:
            start, end, perms = re.match(r"([0-9a-f]+)-([0-9a-f]+) (\S+)", row).groups()
            start, end = int(start, 16), int(end, 16)
            if "r" in perms and end - start < 1 << 30:
                try:
                    mem.seek(start)
                    found += needle in mem.read(end - start)
                except OSError:
                    pass
    result = f"read: {found} region(s) hold it"
except OSError as exc:
    result = f"refused: {exc}"
open(out, "w").write(result)
"""


NO_PTRACE = ("setpriv", "--inh-caps=-sys_ptrace", "--bounding-set=-sys_ptrace")


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("setpriv") is None,
    reason="runs the job without CAP_SYS_PTRACE through setpriv, as root",
)
def test_the_job_s_command_cannot_read_the_credential_in_its_parent_s_memory(
    hub: Hub, tmp_path: Path
) -> None:
    """Where ptrace is not restricted further (no Yama, or ``ptrace_scope`` 0) a process
    reads the memory of any other process of its user: the command found the credential
    in `ci run`'s ``/proc/PPID/mem`` (two regions held it after the re-exec). `ci run` is
    not dumpable now. Run without CAP_SYS_PTRACE, as a CI user is."""
    token = hub.credential("gha")
    seen = tmp_path / "memory"
    command = [sys.executable, "-c", PEEK_MEMORY, token[-24:], str(seen)]
    workdir = tmp_path / "job"
    workdir.mkdir()
    env = {**os.environ, "LIFELINE_MESH_TOKEN": token, "PATH": BIN_PATH}
    done = subprocess.run(
        [*NO_PTRACE, *MESH, "ci", "run", "--", *command],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "synced line 'ledger' back" in done.stderr  # the job used the credential
    assert seen.read_text().startswith("refused: "), seen.read_text()
