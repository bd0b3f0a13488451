"""Write docs/decisions/README.md, one row per decision record by number (from the repo root)."""

from __future__ import annotations

import re
from pathlib import Path

DIR = Path("docs/decisions")


def main() -> None:
    records = sorted(DIR.glob("[0-9][0-9][0-9][0-9]-*.md"))
    rows = []
    for path in records:
        title = path.read_text(encoding="utf-8").splitlines()[0].lstrip("# ").strip()
        title = re.sub(r"^\d{4}\s*[—-]\s*", "", title)
        rows.append(f"| {path.name[:4]} | [{title}]({path.name}) |")
    used = {int(p.name[:4]) for p in records}
    unused = [f"{n:04d}" for n in range(1, max(used) + 1) if n not in used]
    gaps = (
        f" {', '.join(unused)} were given to work folded into other records and never used."
        if unused
        else ""
    )
    text = (
        "# Decision records\n\n"
        "Each record says what was decided, why, and what it cost; the figures behind it are\n"
        f"in docs/benchmarks.md. Numbers are given out in order.{gaps}\n\n"
        "| # | decision |\n| --- | --- |\n" + "\n".join(rows) + "\n"
    )
    (DIR / "README.md").write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
