"""Regenerate the viewer's screenshots in docs/img/ (the README shows one).

    .venv/bin/python scripts/screenshots.py

Builds the sample project the browser tests use (tests/support/ui_project.py), serves it on
127.0.0.1 (a free port), and has headless Chromium (Debian's chromium + chromium-driver,
through Selenium) save one PNG per main page.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.support.browser import chromium  # noqa: E402
from tests.support.ui_project import build_project  # noqa: E402
from tests.support.ui_server import running_viewer  # noqa: E402
from tests.support.ui_sessions import SUBAGENT_PARENT  # noqa: E402

OUT = REPO / "docs" / "img"


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        project = build_project(Path(tmp) / "payments")
        ids = project.ids
        pages = {
            "viewer-truth.png": "/lines/ledger/",
            "viewer-entry.png": f"/lines/ledger/entries/{ids['fix']}",
            "viewer-history.png": "/lines/ledger/history",
            "viewer-graph.png": f"/lines/ledger/graph/{ids['note']}",
            "viewer-mesh.png": "/mesh",
            "viewer-sessions.png": "/sessions",
            "viewer-transcript.png": f"/lines/sessions/sessions/{SUBAGENT_PARENT}?from=300",
            "viewer-unfinished.png": "/lines/sessions/unfinished",
        }
        with running_viewer(project.root) as url, chromium(1280, 860) as driver:
            for name, path in pages.items():
                driver.get(url + path)
                driver.save_screenshot(str(OUT / name))
                print(f"wrote {OUT / name}")


if __name__ == "__main__":
    main()
