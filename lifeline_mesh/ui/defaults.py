"""The viewer's defaults, named once for the viewer and its command-line options.

Imports nothing: `serve` reads them on every start without loading the viewer
(decision 0039).
"""

from __future__ import annotations

__all__ = ["DEFAULT_LISTEN", "TOKEN_ENV"]

DEFAULT_LISTEN = "127.0.0.1:8470"
TOKEN_ENV = "LIFELINE_UI_TOKEN"
