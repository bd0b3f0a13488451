"""The console commands `lifeline` and `lifeline-mesh`: check the environment, then run.

lifeline-context, the predecessor, also ships a top-level ``lifeline`` package and a
``lifeline`` command. pip installs both into one environment without a word and mixes their
files: whichever was installed last wins each file, and uninstalling one deletes files the
other needs. This module imports only the standard library until the check is done, so it
can still say what happened — in one line, with the fix — when the mix has broken our
``lifeline`` package (docs/migration.md).
"""

from __future__ import annotations

import importlib
import importlib.metadata
import os
import sys

__all__ = ["lifeline", "lifeline_mesh", "mixed_install"]

FIX = (
    "fix: pip uninstall -y lifeline-context && pip install --force-reinstall lifeline-mesh, "
    "and run lifeline-context from its own environment (pipx install lifeline-context==0.6.1); "
    "see docs/migration.md"
)


def mixed_install() -> str | None:
    """One line when lifeline-context is installed in this same environment, else None."""
    try:
        other = importlib.metadata.distribution("lifeline-context")
    except importlib.metadata.PackageNotFoundError:
        return None
    return (
        f"lifeline-context {other.version} is installed in this environment ({sys.prefix}) "
        f"next to lifeline-mesh; both ship the `lifeline` package, so their files are mixed; "
        f"{FIX}"
    )


def _launch(module: str, prog: str) -> None:
    # gRPC's C core writes its own log lines (E1203 12:00:00.000 ... ev_poll_posix.cc) straight
    # to stderr, past our one-line errors; it stays quiet unless the user asks for them.
    os.environ.setdefault("GRPC_VERBOSITY", "NONE")
    mixed = mixed_install()
    if mixed is not None:
        print(f"{prog}: warning: {mixed}", file=sys.stderr)
    try:
        main = importlib.import_module(module).main
    except ImportError as exc:
        what = mixed or (
            f"the installed `lifeline` package is incomplete ({exc}), as after "
            "`pip uninstall lifeline-context` in a shared environment; "
            "fix: pip install --force-reinstall lifeline-mesh"
        )
        print(f"{prog}: error: {what}", file=sys.stderr)
        sys.exit(2)
    main()


def lifeline() -> None:
    """The `lifeline` command."""
    _launch("lifeline.cli.main", "lifeline")


def lifeline_mesh() -> None:
    """The `lifeline-mesh` command."""
    _launch("lifeline_mesh.cli.main", "lifeline-mesh")
