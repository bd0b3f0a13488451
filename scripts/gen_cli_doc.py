"""Write docs/cli.md from the parsers themselves, so the reference never drifts.

python scripts/gen_cli_doc.py          # rewrite docs/cli.md
python scripts/gen_cli_doc.py --check  # exit 1 when docs/cli.md is stale
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TARGET = REPO / "docs" / "cli.md"

HEADER = """# CLI reference

Generated from the commands' own `--help` by `python scripts/gen_cli_doc.py`; a test fails
when this file and `--help` disagree. Conventions for every command:

- `--root DIR` (default: the current directory) and `--line NAME` (default: `ledger`) are
  accepted before or after the command name; `-v` shows tracebacks and debug logs.
- Errors are one line on stderr and exit status 2; checks that find a problem (`verify`)
  exit 1; success is 0. A path the file system refuses (a file where a folder must be,
  a folder that cannot be made, a full disk) is such an error too, naming the path.
- Text from entries and sessions is printed with its control characters (ESC, BEL, C1)
  escaped, so a member's text cannot drive your terminal; `--json` gives it as stored.
- Read commands take `--json` for machine-readable output.
"""


def _help(parser: argparse.ArgumentParser) -> str:
    return parser.format_help().rstrip()


def _section(prog: str, parser: argparse.ArgumentParser, depth: int = 2) -> list[str]:
    """The parser's help, then each subcommand's (and theirs: ``sessions ingest``)."""
    out = [f"{'#' * depth} `{prog}`", "", "```text", _help(parser), "```", ""] if depth == 2 else []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in sorted(action.choices.items()):
                title = f"{'#' * (depth + 1)} `{prog} {name}`"
                out += [title, "", "```text", _help(sub), "```", ""]
                out += _section(f"{prog} {name}", sub, depth + 1)
    return out


def render() -> str:
    os.environ["COLUMNS"] = "100"  # stable wrapping whatever the terminal
    from lifeline.cli.main import build_parser as ledger_parser
    from lifeline_mesh.cli.main import build_parser as mesh_parser

    lines = [HEADER]
    lines += _section("lifeline", ledger_parser())
    lines += _section("lifeline-mesh", mesh_parser())
    return "\n".join(lines).rstrip() + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail when docs/cli.md is stale")
    args = parser.parse_args()
    text = render()
    if args.check:
        if not TARGET.exists() or TARGET.read_text(encoding="utf-8") != text:
            print("docs/cli.md is stale: run python scripts/gen_cli_doc.py", file=sys.stderr)
            sys.exit(1)
        return
    TARGET.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
