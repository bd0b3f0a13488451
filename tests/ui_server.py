"""The viewer served by real uvicorn on 127.0.0.1 port 0 in a background thread, for tests."""

from __future__ import annotations

import asyncio
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.ui.server import bind, serve_viewer
from lifeline_mesh.ui.viewer import Viewer

__all__ = ["fetch", "running_viewer"]


@contextmanager
def running_viewer(root: Path, token: str | None = None) -> Iterator[str]:
    """Serve ``root``; yields the base URL (``http://127.0.0.1:PORT``)."""
    ready = threading.Event()
    urls: list[str] = []
    holder: dict[str, object] = {}

    async def main() -> None:
        stop = asyncio.Event()
        holder["stop"], holder["loop"] = stop, asyncio.get_running_loop()
        sock = bind("127.0.0.1", 0)

        def on_ready(url: str) -> None:
            urls.append(url.split("/?")[0].rstrip("/"))
            ready.set()

        await serve_viewer(Viewer(NodeHome(root), token=token), sock, stop, on_ready)

    thread = threading.Thread(target=asyncio.run, args=(main(),), daemon=True)
    thread.start()
    assert ready.wait(30), "the viewer did not start"
    try:
        yield urls[0]
    finally:
        loop = holder["loop"]
        assert isinstance(loop, asyncio.AbstractEventLoop)
        loop.call_soon_threadsafe(holder["stop"].set)  # type: ignore[attr-defined]
        thread.join(30)


def fetch(url: str, headers: dict[str, str] | None = None) -> tuple[int, str, dict[str, str]]:
    """GET without following redirects: (status, body text, headers)."""

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args: object, **kwargs: object) -> None:
            return None

    opener = urllib.request.build_opener(NoRedirect)
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with opener.open(request, timeout=30) as response:
            return response.status, response.read().decode(), dict(response.headers)
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(), dict(exc.headers)
