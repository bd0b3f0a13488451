"""docs/user-guide.md, run as written: four machines on loopback, every block in order.

Each ```sh block opens with `# on MACHINE`; it runs in the directory of that machine
(laptop-a, laptop-b, ci, auditor under one temporary directory), all in one `sh -eu`
process so that what one machine prints can reach the next, as a person copying it would.
The guide speaks of real machines, so the test makes these substitutions, and no others:

- laptop A's `serve` runs in the background on 127.0.0.1, free ports; the guide's
  addresses `192.168.1.20:7420` (sync) and `:7421` (joins) become the ones serve printed;
- the token an `invite` prints is kept; `lifeline-mesh join -` (where a person pastes it)
  gets it on standard input; on the CI runner it is exported as `LIFELINE_MESH_TOKEN` (the
  CI secret of the guide);
- `NODE_ID` becomes the id the CI job printed with `lifeline-mesh id`.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.support.paths import REPO
from tests.support.readme_blocks import run_block, sh_blocks

GUIDE = REPO / "docs" / "user-guide.md"
SYNC, JOIN = "192.168.1.20:7420", "192.168.1.20:7421"
SERVE = f"lifeline-mesh serve --listen {SYNC} --join-listen {JOIN}"
SERVE_ON_LOOPBACK = """\
lifeline-mesh serve --listen 127.0.0.1:0 --join-listen 127.0.0.1:0 > ../serve.log 2>&1 &
SERVE_PID=$!
until grep -q '^join port on ' ../serve.log; do
    kill -0 "$SERVE_PID" || { cat ../serve.log; exit 1; }
    sleep 0.1
done
SYNC_ADDR=$(sed -n 's/^listening on //p' ../serve.log)
JOIN_ADDR=$(sed -n 's/^join port on //p' ../serve.log)
"""


def blocks() -> list[tuple[str, str]]:
    found = re.findall(r"^```sh\n# on ([\w-]+)[^\n]*\n(.*?)^```$", GUIDE.read_text(), re.M | re.S)
    return [(machine, body) for machine, body in found]


def test_every_shell_block_of_the_guide_is_run() -> None:
    # A block without its `# on MACHINE` line would be left out of the script silently.
    assert len(blocks()) == len(sh_blocks(GUIDE.read_text(encoding="utf-8")))


def _line(machine: str, line: str) -> str:
    if line.strip() == SERVE:
        return SERVE_ON_LOOPBACK
    line = line.replace(SYNC, "$SYNC_ADDR").replace(JOIN, "$JOIN_ADDR")
    if line.startswith("lifeline-mesh invite "):
        return f'TOKEN=$({line})\necho "$TOKEN"'
    if line.strip() == "lifeline-mesh join -":
        return "printf '%s\\n' \"$TOKEN\" | lifeline-mesh join -"
    if machine == "ci" and line.strip() == "lifeline-mesh id":
        return 'CI_NODE_ID=$(lifeline-mesh id)\necho "$CI_NODE_ID"'
    return line.replace("NODE_ID", '"$CI_NODE_ID"')


def script() -> str:
    parts = ['SANDBOX="$PWD"']
    for machine, body in blocks():
        parts.append(f'mkdir -p "$SANDBOX/{machine}" && cd "$SANDBOX/{machine}"')
        parts.append(f'echo "=== {machine}"')
        if machine == "ci":
            parts.append('export LIFELINE_MESH_TOKEN="$TOKEN"')
        parts += [_line(machine, line) for line in body.splitlines()]
        if machine == "ci":
            parts.append("unset LIFELINE_MESH_TOKEN")
    parts.append('kill "$SERVE_PID"')
    return "\n".join(parts) + "\n"


def test_the_guide_has_the_four_machines_and_the_placeholders() -> None:
    machines = [m for m, _ in blocks()]
    assert {"laptop-a", "laptop-b", "ci", "auditor"} == set(machines)
    text = script()
    assert SERVE_ON_LOOPBACK in text  # the serve line was found and replaced
    assert text.count("| lifeline-mesh join -") == 2  # laptop B and the auditor paste it
    for placeholder in ("NODE_ID ", SYNC, JOIN):
        assert placeholder not in text.replace("CI_NODE_ID", ""), placeholder


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_guide_runs_as_written(tmp_path: Path) -> None:
    # Four nodes, two dozen commands, each a Python start-up: about a minute on an idle
    # machine, several on a loaded one. The budget is what the script may take in all; every
    # wait inside it (serve's ports) ends when its process exits.
    result = run_block(
        "unset LIFELINE_MESH_TOKEN\n" + script(),
        tmp_path,
        env={"LIFELINE_AUTHOR": "guide"},
        timeout=600,
    )
    out, err = result.stdout, result.stderr
    assert result.returncode == 0, f"stdout:\n{out}\nstderr:\n{err}"
    laptop_b = out.split("=== laptop-b")[1].split("=== ")[0]
    ci = out.split("=== ci")[1].split("=== ")[0]
    auditor = out.split("=== auditor")[1]
    # B received A's decisions; the runner received B's fix; the auditor holds it all, and
    # the audit passes with exactly the notes the guide explains.
    assert "Database: PostgreSQL" in laptop_b
    assert "Retry PIX webhooks with backoff" in (tmp_path / "ci" / "context.md").read_text()
    runner = ci.split()[-1]  # `lifeline-mesh id` on the runner, after `ci run`
    assert re.search(rf"^{runner}\s+member\s+active .*CI runner \(ci-runners\) until", out, re.M)
    assert "runners 1" in out, out
    assert re.search(r"^\S+\s+member\s+revoked since", out, re.M), out
    assert "1 running runner revoked" in out, out
    assert "OK: 1 line verified, no problems" in auditor
    assert "note: imported x4" in auditor and "note: revoked-signer" in auditor
    assert "Load test: PIX path holds 800 rps" in auditor
    history = auditor.split("no problems")[-1]
    assert all(s in history for s in ("Retry PIX", "Load test", "Database: PostgreSQL"))
