"""`lifeline-mesh ci` against a real serving node: enroll, pull, context, run, sync back;
fail fast; a failed sync keeps every entry; racing jobs; a revoked credential ends runners."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.support.ci_helpers import LIFELINE, MESH, Hub, job, stop
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
        and "entries this job wrote are NOT lost" in done.stderr
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
