"""`ci run` again in the same workspace (a job re-run locally, or `.lifeline/` kept between
jobs) works: the runner is kept while its certificate lasts, enrolled anew once it has
expired, and a workspace of another mesh is a one-line error."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.ci_helpers import Hub, job
from tests.support.mesh_procs import cli

WRITE = 'lifeline log --kind test --summary "CI run $RUN" --agent ci'


def _runners(hub: Hub, name: str) -> list[dict[str, object]]:
    members = json.loads(cli("lifeline_mesh", hub.root, "members", "--json").stdout)["members"]
    return [m for m in members if m.get("credential") == name]


def test_a_job_run_twice_in_one_workspace_keeps_its_runner(hub: Hub, tmp_path: Path) -> None:
    token = hub.credential("rerun")
    work = tmp_path / "job"
    first = job(work, token, "ci", "run", "--", "sh", "-c", WRITE.replace("$RUN", "1"))
    assert first.returncode == 0, first.stderr
    second = job(work, token, "ci", "run", "--", "sh", "-c", WRITE.replace("$RUN", "2"))
    assert second.returncode == 0, second.stderr
    assert "is still enrolled" in second.stderr
    history = cli("lifeline", hub.root, "history").stdout
    assert "CI run 1" in history and "CI run 2" in history
    assert len(_runners(hub, "rerun")) == 1  # one runner, one use of the credential
    rows = json.loads(cli("lifeline_mesh", hub.root, "credentials", "--json").stdout)
    assert [(r["name"], r["used"]) for r in rows if r["name"] == "rerun"] == [("rerun", 1)]


def test_an_expired_runner_enrolls_again(hub: Hub, tmp_path: Path) -> None:
    # A certificate shorter than the reuse margin is "nearly expired" from the start.
    token = hub.credential("short", "--job-ttl", "10m")
    work = tmp_path / "job"
    assert job(work, token, "ci", "run", "--", "true").returncode == 0
    again = job(work, token, "ci", "run", "--", "sh", "-c", WRITE.replace("$RUN", "late"))
    assert again.returncode == 0, again.stderr
    assert again.stderr.count("enrolled ") == 1 and "still enrolled" not in again.stderr
    assert "CI run late" in cli("lifeline", hub.root, "history").stdout


def test_a_workspace_of_another_mesh_is_one_clear_line(hub: Hub, tmp_path: Path) -> None:
    work = tmp_path / "job"
    work.mkdir()
    assert cli("lifeline_mesh", work, "init", "--new-mesh", "other").returncode == 0
    done = job(work, hub.credential("elsewhere"), "ci", "run", "--", "true")
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "not to the mesh of this credential" in done.stderr
