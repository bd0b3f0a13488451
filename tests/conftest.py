"""Shared fixtures (the lifeline-context 0.6.1 fixture) and the xdist scheduling hook.

The fixture lives in the repository (``tests/fixtures/``, provenance in
``tests/fixtures/PROVENANCE.md``), so a clone alone runs every test. Plain helpers live in
``tests/support/``; nothing imports from this file.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest

from tests.support.lc_venv import lc_cache_venv
from tests.support.paths import LC_FIXTURE
from tests.support.pg_server import pg_server  # noqa: F401  (the session's PostgreSQL server)

# A hub root keeps its sessions index in the user's cache (lifeline/sessions/hub_index.py):
# the suite's processes (and the CLIs they start) use a folder of the suite's own. The
# Docker images' cache (docker/build.sh: the debootstrapped base's package list, the
# wheelhouse, the PostgreSQL packages) stays the user's, or every run makes the base again;
# so does the venv holding the pinned lifeline-context release (tests/support/lc_venv.py).
_USER_CACHE = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
os.environ.setdefault("LIFELINE_DOCKER_CACHE", str(Path(_USER_CACHE) / "lifeline-mesh" / "docker"))
os.environ.setdefault("LIFELINE_CONTEXT_VENV", str(lc_cache_venv(Path(_USER_CACHE))))
_CACHE = tempfile.mkdtemp(prefix="lifeline-test-cache-")
os.environ["XDG_CACHE_HOME"] = _CACHE
atexit.register(shutil.rmtree, _CACHE, True)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under pytest-xdist (``make test``), files holding slow tests are handed out first.

    ``--dist loadfile`` gives each worker whole files, in collection order (with
    ``--no-loadscope-reorder``): the long end-to-end files start early instead of one of them
    starting last and running alone. Test order inside a file is unchanged. A plain
    ``pytest`` run keeps the usual order."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return
    slow_files = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in slow_files)  # stable: the rest keep order


@pytest.fixture
def lc_fixture() -> Path:
    if not LC_FIXTURE.is_dir():
        pytest.skip(f"the lifeline-context fixture is not at {LC_FIXTURE}")
    return LC_FIXTURE


@pytest.fixture
def lc_expected(lc_fixture: Path) -> dict[str, list[dict[str, Any]]]:
    data: dict[str, list[dict[str, Any]]] = json.loads((lc_fixture / "expected.json").read_text())
    return data
