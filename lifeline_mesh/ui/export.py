"""``lifeline-mesh ui --static DIR``: the same site written as files, links relative.

The exporter renders the pages through the very application that serves them (called in
process, no socket) with relative links, starting from the home page and the Mesh page and
following every link a page makes, so the copy holds exactly the pages its links reach.
Forms (search, filters) need the live viewer and are left out of the copy.

``DIR`` must be new or empty, and every file is created new under it without following a
link (:class:`lifeline.fsutil.NewTree`): a link planted there (``index.html`` to a
dotfile) never has its target written over.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lifeline.fsutil import NewTree
from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.ui.app import ASSETS, create_app
from lifeline_mesh.ui.links import static_file
from lifeline_mesh.ui.viewer import Viewer

__all__ = ["ExportReport", "asgi_get", "export_site"]


class ExportReport:
    def __init__(self) -> None:
        self.pages = 0
        self.errors: list[tuple[str, int]] = []  # pages written as an error page


async def asgi_get(app: Any, path: str, query: str = "") -> tuple[int, bytes]:
    """GET ``path`` from an ASGI app in process: (status, body)."""
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": query.encode(),
        "root_path": "",
        "headers": [(b"host", b"localhost")],
        "client": ("127.0.0.1", 0),
        "server": ("localhost", 80),
    }
    status = 0
    chunks: list[bytes] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = int(message["status"])
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))

    await app(scope, receive, send)
    return status, b"".join(chunks)


async def export_site(
    home: NodeHome, target: Path, progress: Callable[[int], None] | None = None
) -> ExportReport:
    """Write the site of ``home`` under ``target``, a new or empty folder (created)."""
    tree = NewTree(target)  # before anything is read: a folder in use is refused at once
    found: list[str] = []
    viewer = Viewer(home, static=True, on_link=found.append)
    app = create_app(viewer)
    report = ExportReport()
    queue = deque(["/", "/mesh"])
    seen = set(queue)
    written: set[str] = set()  # two paths of one page ("x/history", "x/history/"): once
    try:
        _copy_assets(tree)
        while queue:
            path = queue.popleft()
            out = static_file(path)
            if out in written:
                continue
            found.clear()
            status, body = await asgi_get(app, path)
            if status != 200:
                report.errors.append((path, status))
            tree.write(out, body)  # a copy to publish: no fsync per page
            written.add(out)
            report.pages += 1
            if progress is not None and report.pages % 500 == 0:
                progress(report.pages)
            for link in found:
                if link not in seen and not link.startswith("/assets/"):
                    seen.add(link)
                    queue.append(link)
    finally:
        tree.close()
        await viewer.close()
    return report


def _copy_assets(tree: NewTree) -> None:
    for folder, _dirs, files in os.walk(ASSETS):
        for name in sorted(files):
            source = Path(folder, name)
            tree.write(f"assets/{source.relative_to(ASSETS).as_posix()}", source.read_bytes())
