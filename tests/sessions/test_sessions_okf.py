"""`lifeline sessions export --okf`: the fixtures' sessions and bundles as an Open Knowledge
Format v0.2 folder, checked against the spec's rules (SPEC.md §4, §5, §8, §11) and by an
independent validator (okf-ingest's `okf validate --strict`, a test-only dependency)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.sessions_support import lay_out_home, run_cli

_ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$")


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    base = tmp_path_factory.mktemp("okf")
    home = lay_out_home(base / "home")
    root = base / "project"
    root.mkdir()
    assert run_cli(root, "sessions", "ingest", "--all", home=home).returncode == 0
    out = base / "okf"
    done = run_cli(root, "sessions", "export", "--okf", str(out), home=home)
    assert done.returncode == 0, done.stderr
    assert "21 sessions and" in done.stdout
    return root, home, out


def _split(path: Path) -> tuple[dict[str, Any] | None, str]:
    text = path.read_text(encoding="utf-8")
    if not text.startswith("---\n"):
        return None, text
    head, _, body = text[4:].partition("\n---\n")
    data = yaml.safe_load(head)
    assert isinstance(data, dict), path
    return data, body


def test_the_export_follows_the_spec_rules(exported: tuple[Path, Path, Path]) -> None:
    _, _, out = exported
    concepts = 0
    for path in sorted(out.rglob("*.md")):
        meta, body = _split(path)
        if path.name == "index.md":  # §8: no frontmatter, but the root may say its version
            assert meta is None or (path.parent == out and meta == {"okf_version": "0.2"})
            assert all(line.startswith(("#", "* [")) for line in body.splitlines() if line)
            continue
        assert path.name != "log.md"
        assert meta is not None and isinstance(meta.get("type"), str) and meta["type"]  # §11
        concepts += 1
        assert meta.get("status", "stable") in ("draft", "stable", "deprecated")  # §5.4
        generated = meta["generated"]
        assert generated["by"].startswith("lifeline/")  # §7 actor
        assert "at" not in generated or _ISO.match(generated["at"])  # §5 timestamps
        ids = {s["id"] for s in meta.get("sources", [])}
        for source in meta.get("sources", []):
            assert source["resource"].startswith("lifeline:sessions/")  # §5.1: required
            assert source["author"].startswith("process:")
        cited = set(re.findall(r"\[\^(p\d+)\](?!:)", body))
        assert cited == ids  # §5.1: footnote labels are the join key into sources
        for link in re.findall(r"\]\((/[^)]+)\)", body):
            assert (out / link.lstrip("/")).exists(), link
    assert concepts > 21 * 1 + 7


def test_an_independent_validator_finds_it_conformant(exported: tuple[Path, Path, Path]) -> None:
    _, _, out = exported
    done = subprocess.run(
        [sys.executable, "-m", "okf", "validate", "--strict", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    report = json.loads(done.stdout)
    assert report["conformant"] is True and report["errors"] == 0, report
    rules = {f["rule"] for f in report["findings"]}
    # the only warning: a session the transcript gives no time for has no generated.at
    assert rules <= {"missing_timestamp"}, report["findings"]


def test_the_export_is_the_same_twice_and_never_overwrites(
    exported: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    root, home, out = exported
    again = tmp_path / "again"
    assert run_cli(root, "sessions", "export", "--okf", str(again), home=home).returncode == 0
    first = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    second = {p.relative_to(again): p.read_bytes() for p in again.rglob("*") if p.is_file()}
    assert first == second
    refused = run_cli(root, "sessions", "export", "--okf", str(out), home=home)
    assert refused.returncode == 2 and "not an empty folder" in refused.stderr
    ready = [p for p in out.glob("bundles/*/bundle.md") if 'status: "draft"' in p.read_text()]
    assert ready  # the never-used session's topic is exported, marked draft
