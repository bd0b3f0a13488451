"""examples/ci/ works: the workflow files validate against their CI systems' schemas (the
validator's vendored copies, offline), and their job steps, run as written in a checkout,
enroll against a real local node, run the tests and sync the result back."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from tests.support.ci_helpers import BIN_PATH, Hub
from tests.support.mesh_procs import cli
from tests.support.paths import REPO

EXAMPLES = REPO / "examples" / "ci"
GITHUB, GITLAB = EXAMPLES / "github-actions.yml", EXAMPLES / "gitlab-ci.yml"
VALIDATOR = Path(sys.executable).parent / "check-jsonschema"


def _validate(schema: str, path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(VALIDATOR), "--builtin-schema", schema, str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(
    ("schema", "path"), [("vendor.github-workflows", GITHUB), ("vendor.gitlab-ci", GITLAB)]
)
def test_the_workflows_validate_and_a_broken_one_does_not(
    schema: str, path: Path, tmp_path: Path
) -> None:
    done = _validate(schema, path)
    assert done.returncode == 0, done.stdout + done.stderr
    broken = tmp_path / path.name  # the validator does catch a mistake
    text = path.read_text()
    broken.write_text(text.replace("runs-on:", "runs_on:").replace("script:", "scripts:"))
    assert _validate(schema, broken).returncode != 0


def _steps(path: Path) -> tuple[list[str], dict[str, str]]:
    """The shell steps of the file's one job, and the job's environment (secrets aside)."""
    data: Any = YAML(typ="safe").load(path.read_text())
    if path == GITHUB:
        steps = data["jobs"]["test"]["steps"]
        runs = [s["run"] for s in steps if "run" in s]
        env = {k: v for s in steps for k, v in s.get("env", {}).items()}
    else:
        runs, env = data["test"]["script"], data["test"].get("variables", {})
    env = {
        k: v for k, v in env.items() if k not in ("LIFELINE_MESH_TOKEN", "LIFELINE_MESH_PACKAGE")
    }
    return runs, env


@pytest.mark.parametrize("path", [GITHUB, GITLAB], ids=["github", "gitlab"])
def test_the_job_steps_run_against_a_real_node(path: Path, hub: Hub, tmp_path: Path) -> None:
    runs, env = _steps(path)
    # The team's copy of the package (tests/deploy/test_wheel.py installs a wheel); this test
    # uses the installed one.
    assert runs[0].startswith('pip install "$LIFELINE_MESH_PACKAGE"')
    assert any(r.removeprefix("exec ").startswith("lifeline-mesh ci run -- ") for r in runs[1:])
    checkout = tmp_path / "checkout"  # a repository with tests and the example's job script
    (checkout / "ci").mkdir(parents=True)
    shutil.copy(EXAMPLES / "agent-job.sh", checkout / "ci" / "agent-job.sh")
    (checkout / "test_smoke.py").write_text("def test_ok() -> None:\n    assert True\n")
    token = hub.credential(path.stem, "--lines", "ledger")  # what the secret holds
    job_env = {
        **os.environ,
        **{k: "abc1234" for k in env},  # ${{ github.sha }} / $CI_COMMIT_SHA
        "LIFELINE_MESH_TOKEN": token,
        "PATH": BIN_PATH,
    }
    for step in runs[1:]:
        done = subprocess.run(
            ["sh", "-eu", "-c", step],
            cwd=checkout,
            env=job_env,
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert done.returncode == 0, done.stdout + done.stderr
    assert "team context:" in done.stdout and "1 passed" in done.stdout
    history = cli("lifeline", hub.root, "history").stdout
    assert "CI abc1234: the test suite passes" in history
