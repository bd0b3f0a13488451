"""`make demo`: a three-node mesh on loopback, end to end, with real CLI processes.

Laptop A creates a mesh and serves it; laptop B and a CI runner join with one-time invites
(the runner through ``LIFELINE_MESH_TOKEN``, as a CI secret would give it); each records
entries; they sync over mutual TLS; every node prints the same merged context; ``verify``
audits ids and signatures on each; a node of another mesh is refused.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

__all__ = ["main"]

BOLD = "\033[1m" if sys.stdout.isatty() else ""
RESET = "\033[0m" if sys.stdout.isatty() else ""


def step(text: str) -> None:
    print(f"\n{BOLD}== {text}{RESET}", flush=True)


def run(
    node: str,
    root: Path,
    module: str,
    *args: str,
    env: dict[str, str] | None = None,
    check: bool = True,
    show: bool = True,
) -> str:
    prog = "lifeline" if module == "lifeline" else "lifeline-mesh"
    # Quoted as a shell would need them, so a shown command can be pasted (long tokens cut).
    shown = " ".join(shlex.quote(a) if len(a) < 60 else a[:24] + "…" for a in args)
    if show:
        print(f"[{node}] $ {prog} {shown}", flush=True)
    proc = subprocess.run(
        [sys.executable, "-m", module, "--root", str(root), *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=120,
    )
    out = (proc.stdout + proc.stderr).strip()
    if check and proc.returncode != 0:
        raise SystemExit(f"demo failed at `{prog} {shown}` on {node}:\n{out}")
    if show and out:
        print("\n".join(f"    {line}" for line in out.splitlines()), flush=True)
    return proc.stdout.strip() if proc.returncode == 0 else out


def start_server(root: Path) -> tuple[subprocess.Popen[str], str, str]:
    print("[laptop-a] $ lifeline-mesh serve --listen 127.0.0.1:0   (in the background)")
    proc = subprocess.Popen(
        [sys.executable, "-m", "lifeline_mesh", "--root", str(root), "serve"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    listening = proc.stdout.readline().strip()
    joining = proc.stdout.readline().strip()
    if not listening.startswith("listening on "):
        proc.kill()
        raise SystemExit(
            f"the server did not start: {listening} {proc.stderr.read() if proc.stderr else ''}"
        )
    print(f"    {listening}\n    {joining}")
    return proc, listening.split()[-1], joining.split()[-1]


def setup(root: Path, node: str, *, show: bool) -> None:
    root.mkdir()
    run(node, root, "lifeline", "init", show=show)
    run(node, root, "lifeline_mesh", "share", "ledger", show=show)


def main() -> None:
    started = time.monotonic()
    os.environ.setdefault("LIFELINE_AUTHOR", "demo")
    with tempfile.TemporaryDirectory(prefix="lifeline-demo-") as tmp:
        a, b, ci, other = (Path(tmp) / n for n in ("laptop-a", "laptop-b", "ci-runner", "other"))
        step("Each machine creates its line and shares it with the mesh (private otherwise)")
        for root, name in ((a, "laptop-a"), (b, "laptop-b"), (ci, "ci-runner"), (other, "other")):
            setup(root, name, show=name != "other")

        step("Laptop A creates a mesh and records the project's first whys")
        run("laptop-a", a, "lifeline_mesh", "init", "--new-mesh", "aurora")
        run(
            "laptop-a",
            a,
            "lifeline",
            "log",
            "--kind",
            "bootstrap",
            "--summary",
            "Aurora: payments gateway for LATAM",
            "--body",
            "PIX, cards and boleto.",
        )
        run(
            "laptop-a",
            a,
            "lifeline",
            "log",
            "--kind",
            "decision",
            "--summary",
            "Database: PostgreSQL",
            "--body",
            "The audit trail needs cross-row ACID.",
        )
        server, address, join_address = start_server(a)
        try:
            step("Laptop B and a CI runner join with one-time invites")
            token_b = run("laptop-a", a, "lifeline_mesh", "invite", "--address", join_address)
            token_ci = run(
                "laptop-a", a, "lifeline_mesh", "invite", "--ttl", "15m", "--address", join_address
            )
            run("laptop-b", b, "lifeline_mesh", "join", token_b)
            run("ci-runner", ci, "lifeline_mesh", "join", env={"LIFELINE_MESH_TOKEN": token_ci})

            step("Each node writes; they sync over mutual TLS")
            run(
                "laptop-b",
                b,
                "lifeline",
                "log",
                "--kind",
                "open",
                "--summary",
                "Queue: SQS vs RabbitMQ",
                "--body",
                "Decide after the load test.",
                "--agent",
                "claude-code",
                "--provider",
                "anthropic",
                "--model",
                "claude",
            )
            run("laptop-b", b, "lifeline_mesh", "sync", address)
            run("ci-runner", ci, "lifeline_mesh", "sync", address)
            run(
                "ci-runner",
                ci,
                "lifeline",
                "log",
                "--kind",
                "test",
                "--summary",
                "Load test: PIX path holds 800 rps",
                "--body",
                "p99 41 ms on the staging run.",
                "--agent",
                "ci",
            )
            run("ci-runner", ci, "lifeline_mesh", "sync", address)
            run("laptop-b", b, "lifeline_mesh", "sync", address)

            step("The merged context, on every node")
            contexts = {}
            for name, root in (("laptop-a", a), ("laptop-b", b), ("ci-runner", ci)):
                contexts[name] = run(
                    name, root, "lifeline", "context", "--budget", "1500", show=False
                )
            print(contexts["laptop-a"])
            for name, text in contexts.items():
                digest = hashlib.sha256(text.encode()).hexdigest()[:16]
                print(f"    {name:<10} context sha256 {digest}")
            if len(set(contexts.values())) != 1:
                raise SystemExit("the nodes disagree on the context: this is a bug")

            step("Every node audits ids and signatures")
            for name, root in (("laptop-a", a), ("laptop-b", b), ("ci-runner", ci)):
                run(name, root, "lifeline_mesh", "verify")

            step("A node of another mesh is refused")
            run("other", other, "lifeline_mesh", "init", "--new-mesh", "elsewhere", show=False)
            run("other", other, "lifeline_mesh", "sync", address, check=False)
        finally:
            server.terminate()
            server.wait(timeout=30)
    print(f"\ndemo finished in {time.monotonic() - started:.1f}s")


if __name__ == "__main__":
    main()
