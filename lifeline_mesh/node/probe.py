"""``python -m lifeline_mesh.node.probe URL [--wait SECONDS]``: exit 0 once ``URL`` (a node's
``/readyz`` or ``/healthz``, ``serve --metrics-listen``) answers 200, else 1 with one line
saying what it answered. For health checks where no curl is installed: the systemd unit's
``ExecStartPost`` and the image's HEALTHCHECK (decision 0055)."""

from __future__ import annotations

import argparse
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Sequence

__all__ = ["main", "probe"]


def probe(url: str) -> str | None:
    """None when ``url`` answers 200; else what it answered."""
    try:
        with urllib.request.urlopen(url, timeout=10) as resp:
            return None if resp.status == 200 else f"HTTP {resp.status}"
    except urllib.error.HTTPError as exc:
        return f"HTTP {exc.code}: {exc.read(200).decode('utf-8', 'replace').strip()}"
    except (urllib.error.URLError, OSError) as exc:
        return str(getattr(exc, "reason", exc))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lifeline_mesh.node.probe")
    parser.add_argument("url", help="e.g. http://127.0.0.1:9420/readyz")
    parser.add_argument("--wait", type=float, default=0.0, help="retry for this many seconds")
    args = parser.parse_args(argv)
    end = time.monotonic() + args.wait
    while (why := probe(args.url)) is not None and time.monotonic() < end:
        time.sleep(0.5)
    if why is not None:
        print(f"{args.url} is not ready: {why}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
