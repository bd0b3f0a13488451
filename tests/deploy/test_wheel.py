"""The package as a user installs it: a wheel and an sdist that `python -m build` makes and
`twine check` passes, installed into a fresh virtual environment (not this suite's editable
install), where `lifeline-mesh --version` names what it speaks and the README's tour runs.

The fresh environment takes the dependencies from the package index (about a minute on
this machine), so the test is slow and builds once per session.
"""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.support.paths import REPO
from tests.support.readme_blocks import BLOCKS, check_tour_output, run_block, runnable

pytestmark = pytest.mark.slow


def _run(*args: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [str(a) for a in args], cwd=cwd, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, f"{args}\n{done.stdout}\n{done.stderr}"
    return done


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    # A copy of the tracked files only: what a clone builds, not this tree's build leftovers.
    src = tmp_path_factory.mktemp("src")
    archive = subprocess.run(
        ["git", "-C", str(REPO), "ls-files", "-z"], capture_output=True, check=True
    ).stdout
    for name in filter(None, archive.decode().split("\0")):
        if (REPO / name).is_file():
            (src / name).parent.mkdir(parents=True, exist_ok=True)
            (src / name).write_bytes((REPO / name).read_bytes())
    _run(sys.executable, "-m", "build", "--outdir", out, src)
    return out


@pytest.fixture(scope="module")
def fresh_venv(dist: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    venv = tmp_path_factory.mktemp("venv")
    _run(sys.executable, "-m", "venv", venv)
    (wheel,) = dist.glob("*.whl")
    _run(venv / "bin" / "python", "-m", "pip", "install", "-q", wheel)
    return venv / "bin"


def test_the_wheel_and_the_sdist_pass_twine_check(dist: Path) -> None:
    files = sorted(dist.iterdir())
    assert sorted(f.suffix for f in files) == [".gz", ".whl"]
    _run(sys.executable, "-m", "twine", "check", "--strict", *files)
    names = zipfile.ZipFile(next(dist.glob("*.whl"))).namelist()
    # Files that are not modules: the viewer's templates, the generated stubs' types, py.typed.
    for needed in (
        "lifeline_mesh/ui/templates/base.html",
        "lifeline_mesh/ui/static/style.css",
        "lifeline_mesh/wire/sync_pb2.py",
        "lifeline/py.typed",
    ):
        assert needed in names


def test_the_installed_commands_name_their_versions(fresh_venv: Path) -> None:
    mesh = _run(fresh_venv / "lifeline-mesh", "--version").stdout.splitlines()
    assert mesh[0].startswith("lifeline-mesh ")
    assert any(line.startswith("sync protocol: ") for line in mesh)
    assert any(line.startswith("store schema: ledger ") for line in mesh)
    assert _run(fresh_venv / "lifeline", "--version").stdout.startswith("lifeline ")
    # The package, not this checkout: nothing of the repository is on its path.
    where = _run(
        fresh_venv / "python",
        "-c",
        "import lifeline_mesh; print(lifeline_mesh.__file__)",
        cwd=fresh_venv,  # not the checkout, which `python -c` would put first on the path
    )
    assert str(fresh_venv.parent) in where.stdout and str(REPO) not in where.stdout


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_the_readme_tour_runs_from_the_installed_wheel(
    index: int, fresh_venv: Path, tmp_path: Path
) -> None:
    block = runnable(BLOCKS[index])
    if not block.strip() or "make " in block:
        pytest.skip(f"block {index}: only repository commands")
    result = run_block(block, tmp_path, fresh_venv)
    assert result.returncode == 0, f"{block}\n{result.stdout}\n{result.stderr}"
    check_tour_output(block, result)
