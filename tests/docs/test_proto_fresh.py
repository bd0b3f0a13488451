"""The committed generated code matches what scripts/gen_proto.py makes from proto/."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.support.paths import REPO


def test_generated_code_is_not_stale(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, str(REPO / "scripts" / "gen_proto.py"), "--out", str(tmp_path)],
        check=True,
        capture_output=True,
    )
    fresh = {p.name: p.read_bytes() for p in (tmp_path / "lifeline_mesh" / "wire").glob("*_pb2*")}
    committed = {p.name: p.read_bytes() for p in (REPO / "lifeline_mesh" / "wire").glob("*_pb2*")}
    stale = sorted(n for n in fresh if committed.get(n) != fresh[n])
    extra = sorted(set(committed) - set(fresh))
    assert stale == [], f"regenerate with `make proto`: {stale}"
    assert extra == [], f"generated files without a .proto: {extra}"
