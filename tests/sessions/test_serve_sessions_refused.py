"""`serve --sessions` whose sessions line refuses a write (read-only here; a full disk or a
lock held past the wait act the same) keeps the node serving: the watcher says so once and
tries again, instead of taking `serve` down with it.

The sessions line is bind-mounted read-only in a private mount namespace (`unshare -m`,
root); without it the test skips on a laptop and fails under CI.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

from tests.support.mesh_procs import cli, first_line, shared_node
from tests.support.mount_ns import namespaces_work
from tests.support.needs import missing

FIXTURE = (
    Path(__file__).parents[1]
    / "fixtures"
    / "transcripts"
    / "claude-code"
    / "daaain__claude-code-log__claude-code-log-sample__{}.jsonl"
)
WRITTEN_IN = "/Users/dain/workspace/claude-code-log"  # the cwd the fixture's sessions name


def _transcript(folder: Path, name: str, project: Path) -> None:
    text = Path(str(FIXTURE).format(name)).read_text(encoding="utf-8")
    (folder / f"{name}.jsonl").write_text(text.replace(WRITTEN_IN, str(project)))


def test_a_sessions_line_that_refuses_writes_leaves_serve_serving(tmp_path: Path) -> None:
    if not namespaces_work():
        missing("needs unshare -m and mount (run as root) to make the sessions line read-only")
    project, home = tmp_path / "project", tmp_path / "home"
    shared_node(project)
    claude = home / ".claude" / "projects" / str(project).replace("/", "-")
    claude.mkdir(parents=True)
    env = {**os.environ, "HOME": str(home)}
    _transcript(claude, "71c9afe9-d9cc-4583-86b3-e62ba682b83a", project)
    first = subprocess.run(
        [sys.executable, "-m", "lifeline", "--root", str(project), "sessions", "ingest"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert first.returncode == 0, first.stderr
    _transcript(claude, "b45ad5d8-81fb-4bcb-baba-19d9f503d731", project)  # new while serving
    line = shlex.quote(str(project / ".lifeline" / "sessions.db"))
    serve = [sys.executable, "-m", "lifeline_mesh", "--root", str(project), "serve"]
    serve += ["--insecure", "--listen", "127.0.0.1:0", "--no-discovery", "--sessions"]
    script = [
        f"mount --bind {line} {line}",
        f"mount -o remount,bind,ro {line}",
        "exec " + " ".join(shlex.quote(a) for a in serve),
    ]
    proc = subprocess.Popen(
        ["unshare", "-m", "sh", "-c", "\n".join(script)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        listening = first_line(proc, 60, "serve --sessions")
        assert listening.startswith("listening on "), listening
        assert proc.stderr is not None
        said = []
        for text in proc.stderr:  # until the watcher met the read-only line
            said.append(text)
            if "serve --sessions:" in text or "error" in text:
                break
        other = tmp_path / "other"
        shared_node(other)
        synced = cli("lifeline_mesh", other, "sync", "--insecure", listening.split()[-1])
        assert synced.returncode == 0  # the node still serves
    finally:
        proc.terminate()
        out, err = proc.communicate(timeout=60)
    log = "".join(said) + err
    assert "serve --sessions: " in log and "is read-only" in log, log
    assert "tries the transcripts again" in log and "Traceback" not in log, log
    assert proc.returncode == 0 and "stopped after 1 session in" in out, (proc.returncode, log)
