"""`make demo`: a short tour of the product on this machine (single node for now)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

__all__ = ["main"]


def _run(root: Path, *args: str) -> str:
    cmd = [sys.executable, "-m", "lifeline", "--root", str(root), *args]
    print(f"$ lifeline {' '.join(args)}")
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    print(out.rstrip())
    return out.strip()


def main() -> None:
    os.environ.setdefault("LIFELINE_AUTHOR", "demo")
    with tempfile.TemporaryDirectory(prefix="lifeline-demo-") as tmp:
        root = Path(tmp)
        _run(root, "init")
        _run(
            root,
            "log",
            "--kind",
            "bootstrap",
            "--summary",
            "Aurora: payments gateway",
            "--body",
            "PIX, cards and boleto for marketplaces.",
        )
        _run(
            root,
            "log",
            "--kind",
            "decision",
            "--summary",
            "Database: PostgreSQL",
            "--body",
            "The audit trail needs cross-row ACID.",
        )
        _run(root, "history")
        _run(root, "verify")


if __name__ == "__main__":
    main()
