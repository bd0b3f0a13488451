"""Every URL of the viewer, in one place, for the served site and for the static copy.

Served, links are absolute paths with query strings. In a static copy (``ui --static``)
each page is a file and every link is relative to the page it is on, so the folder can be
opened from disk or published anywhere; a link with no file behind it (a filtered timeline,
a search) is ``None`` and the template leaves it out.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable
from urllib.parse import quote, urlencode

__all__ = ["Links", "static_file"]


def static_file(path: str) -> str:
    """The file (relative to the copy's root) that holds the served page ``path``."""
    parts = path.strip("/")
    if not parts:
        return "index.html"
    if path.endswith("/") or parts.endswith("/history"):
        return f"{parts}/index.html"
    if parts.startswith("assets/"):
        return parts
    return f"{parts}.html"


class Links:
    """URLs for one page: ``here`` is the served path of the page being rendered."""

    def __init__(self, here: str, *, static: bool) -> None:
        self.here = here
        self.static = static
        self.on_link: Callable[[str], None] | None = None  # the static export's crawler

    def _to(self, path: str, query: dict[str, str] | None = None) -> str | None:
        if not self.static:
            return path + ("?" + urlencode(query) if query else "")
        if query:
            return None
        if self.on_link is not None:
            self.on_link(path)
        start = posixpath.dirname(static_file(self.here))
        return posixpath.relpath(static_file(path), start or ".")

    def _line(self, line: str) -> str:
        return f"/lines/{quote(line, safe='')}/"

    def home(self) -> str | None:
        return self._to("/")

    def truth(self, line: str) -> str | None:
        return self._to(self._line(line))

    def search(self, line: str, query: dict[str, str] | None = None) -> str | None:
        return None if self.static else self._to(self._line(line) + "search", query)

    def entry(self, line: str, entry_id: str) -> str | None:
        return self._to(self._line(line) + "entries/" + quote(entry_id, safe=""))

    def graph(self, line: str, entry_id: str) -> str | None:
        return self._to(self._line(line) + "graph/" + quote(entry_id, safe=""))

    def history(self, line: str, query: dict[str, str] | None = None) -> str | None:
        query = dict(query or {})
        before = query.pop("before", None)
        if before and self.static and not query:
            return self._to(self._line(line) + "history/before-" + quote(before, safe=""))
        if before:
            query["before"] = before
        return self._to(self._line(line) + "history", query)

    def history_form(self, line: str) -> str | None:
        """Where the filter form submits (served only)."""
        return None if self.static else self._line(line) + "history"

    def sessions_home(self) -> str | None:
        return self._to("/sessions")

    def sessions(self, line: str, query: dict[str, str] | None = None) -> str | None:
        return self._to(self._line(line) + "sessions", query)

    def sessions_form(self, line: str) -> str | None:
        """Where the sessions filter form submits (served only)."""
        return None if self.static else self._line(line) + "sessions"

    def session(
        self, line: str, session_id: str, query: dict[str, str] | None = None
    ) -> str | None:
        return self._to(self._line(line) + "sessions/" + quote(session_id, safe=""), query)

    def bundle(self, line: str, session_id: str) -> str | None:
        return self._to(self._line(line) + "sessions/" + quote(session_id, safe="") + "/bundle")

    def unfinished(self, line: str) -> str | None:
        return self._to(self._line(line) + "unfinished")

    def usage(self, line: str, query: dict[str, str] | None = None) -> str | None:
        return self._to(self._line(line) + "usage", query)

    def usage_form(self, line: str) -> str | None:
        """Where the usage form submits (served only)."""
        return None if self.static else self._line(line) + "usage"

    def sessions_search(self, line: str, query: dict[str, str] | None = None) -> str | None:
        return None if self.static else self._to(self._line(line) + "sessions-search", query)

    def mesh(self) -> str | None:
        return self._to("/mesh")

    def asset(self, name: str) -> str | None:
        return self._to("/assets/" + name)
