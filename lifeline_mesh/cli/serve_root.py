"""What `serve` checks and repairs in its project folder before it starts: the ignore file,
what git tracks, and the modes of `.lifeline/` (docs/security.md, *What to commit* and
*Another user of this machine*)."""

from __future__ import annotations

import sys

from lifeline.file_modes import repair_modes
from lifeline.ignore import (
    ensure_ignore_file,
    refuse_tracked_databases,
    tracked_private_files,
    tracked_warning,
)
from lifeline.wording import count
from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.membership.join import refuse_keys_from_git

__all__ = ["prepare_root"]


def prepare_root(home: NodeHome) -> None:
    """Restore the ignore file and the modes, saying so on stderr; refuse (ConfigError) keys,
    a trust anchor, a hub binding or a line that git tracks: a repository's are its
    author's (decision 0141). Other tracked files get a warning."""
    if ensure_ignore_file(home):
        print(f"restored {home.ignore_path} (keeps keys out of git)", file=sys.stderr)
    tracked = tracked_private_files(home)  # one `git ls-files` for the three checks
    known = tracked or []  # None: no git or no work tree, so nothing is tracked
    refuse_keys_from_git(
        home,
        "serving with it would let its holder act as this node, or its ca.pem choose the "
        "peers this node sends its lines to",
        "`lifeline-mesh init` or `join` again (a new identity)",
        known,
    )
    # what the node takes in would be pushed with the repository
    refuse_tracked_databases(home, known)
    if tracked:  # an ignore file does not untrack them
        print(tracked_warning(tracked), file=sys.stderr)
    repaired = repair_modes(home)
    if repaired:
        shown = ", ".join(f"{home.relative(x.path)} {x.mode:04o}" for x in repaired[:3])
        print(
            f"made {count(len(repaired), 'path')} private that other users could read ({shown}"
            f"{', …' if len(repaired) > 3 else ''}): .lifeline/ 0700, databases 0600",
            file=sys.stderr,
        )
