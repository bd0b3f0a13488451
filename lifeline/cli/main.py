"""Entry point of `lifeline`: builds the parser from the command modules and runs one.

Errors of ours become one line on stderr and exit status 2 (tracebacks only with ``-v``);
``verify`` exits 1 when it finds a problem; output piped into ``head`` ends quietly.
"""

from __future__ import annotations

import argparse
import asyncio
import errno
import gc
import importlib
import os
import sys
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any, NoReturn

from lifeline import __version__
from lifeline.cli.common import global_options
from lifeline.cli.logformat import configure_logging
from lifeline.cli.moved import MOVED_OPTIONS, PASSING, moved_message
from lifeline.errors import LifelineError
from lifeline.wording import clipped_words, error_text

__all__ = ["build_parser", "exit_process", "main", "make_parser", "run"]

# Each module exposes register(subparsers, parent) and sets `func` (async, returns exit code).
COMMAND_MODULES = [
    "cmd_init",
    "cmd_core",
    "cmd_truth",
    "cmd_projection",
    "cmd_lines",
    "cmd_health",
    "cmd_graph",
    "cmd_sessions",
    "cmd_hooks",
]
# A command line that names a command builds only its module's parser. Importing every
# module adds the sessions' pydantic models to each start (bench/history/
# figures-behind-the-code.md), which `render`, `context`, `recall`... need none of; and `sessions`
# needs none of the truth commands' modules. tests/cli/test_cli_core.py keeps this map equal
# to what the modules register.
LIGHT_COMMANDS = {
    "init": "cmd_init",
    **dict.fromkeys(["log", "show", "history", "lines", "verify", "recover"], "cmd_core"),
    **dict.fromkeys(
        ["context", "recall", "resume", "checkpoint", "correct", "pin", "unpin"], "cmd_truth"
    ),
    **dict.fromkeys(["render", "ingest", "import"], "cmd_projection"),
    **dict.fromkeys(["promote", "where"], "cmd_lines"),
    "exam": "cmd_health",
    **dict.fromkeys(["relate", "graph"], "cmd_graph"),
    "sessions": "cmd_sessions",
    "hooks": "cmd_hooks",
}
_TAKES_VALUE = ("--root", "--line", "--log-format")

# Writes the machine refuses: one line saying what to do, not a traceback.
_CANNOT_WRITE = {
    errno.EROFS: "the folder is on a read-only mount; reads work, write elsewhere",
    errno.EACCES: "check the folder's permissions",
    errno.ENOSPC: "the disk is full; free space and run it again (nothing was half-written)",
    errno.EDQUOT: "the disk quota is used up; free space and run it again",
}
# A path the file system refuses (a file where a folder must be, a folder that is not
# there), wherever a command meets it: one line naming the path, not a traceback. Other
# OS errors (no path, or an errno not listed) stay tracebacks: they are likely our bugs.
_PATH_REFUSED = {
    errno.ENOTDIR: "a part of that path is a file, not a folder; give another path",
    errno.ENOENT: "it, or a folder on its way, does not exist; check the path",
    errno.EEXIST: "something is already there; give another path or move it away",
    errno.EISDIR: "it is a folder, not a file; give a file",
    errno.ELOOP: "it is a symbolic link that loops or was refused; mend or remove it",
    errno.ENAMETOOLONG: "the name is too long; give a shorter path",
}


class _Parser(argparse.ArgumentParser):
    """Usage errors are one line on stderr (the usage text is one `--help` away), told by
    the command they are about: `PROG serve --bogus` says `see `PROG serve --help``."""

    _argv: Sequence[str] = ()  # the words this parser was given (its command's, for a command)
    _parsed: argparse.Namespace | None = None

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: Any = None
    ) -> tuple[Any, list[str]]:
        self._argv = list(sys.argv[1:] if args is None else args)
        parsed, extras = super().parse_known_args(args, namespace)
        self._parsed = parsed
        return parsed, extras

    def error(self, message: str) -> NoReturn:
        if message.startswith("unrecognized arguments:") and self._parsed is not None:
            chosen = _chosen(self, self._parsed)
            if chosen is not self:  # the command the words were given to tells them
                chosen.error(message)
        message = clipped_words(_dash_value(self, _did_you_mean(self, message)))
        self.exit(2, f"{self.prog}: error: {message}; see `{self.prog} --help`\n")


def _dash_value(parser: argparse.ArgumentParser, message: str) -> str:
    """``message``, and how to pass a value that starts with a dash when one was taken for
    an option and a positional went missing (`lifeline recall -x`)."""
    if not message.startswith("the following arguments are required:"):
        return message
    known = _option_strings(parser)
    given = getattr(parser, "_argv", ())
    dashed = next(
        (w for w in given if w.startswith("-") and w != "--" and w.split("=")[0] not in known),
        None,
    )
    if dashed is None:
        return message
    return (
        f"{message} ({dashed!r} was taken for an option: put `--` before a value that "
        "starts with a dash)"
    )


def _chosen(parser: argparse.ArgumentParser, parsed: argparse.Namespace) -> _Parser:
    """The (sub)command ``parsed`` names, deepest first: `serve`, `mcp token issue`..."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            child = action.choices.get(getattr(parsed, action.dest or "", None) or "")
            if isinstance(child, _Parser):
                return _chosen(child, parsed)
    assert isinstance(parser, _Parser)
    return parser


def _did_you_mean(parser: argparse.ArgumentParser, message: str) -> str:
    """``message`` with "; did you mean `serve`?" for a mistyped command, choice or option
    (and without the list of every choice then); an option is matched among the command's
    own, without its dashes."""
    import difflib
    import re

    choice = re.match(r"argument .*?: invalid choice: '(.+?)' \(choose from (.+)\)$", message)
    takes = ""
    if choice and (option := _unknown_before(parser, choice[1])):
        message = f"unrecognized arguments: {option} {choice[1]}"  # `mcp --policy x`
        choice = None
    elif choice and (action := _subcommands(parser)) and not action.required:
        message, takes = _unknown_subcommand(parser, action, choice[1])
    if choice:
        typed, offered = choice[1], re.findall(r"'?([^,' ]+)'?", choice[2])
    else:
        unknown = re.match(r"unrecognized arguments: (\S+)", message)
        if not unknown or not unknown[1].startswith("-"):
            return message
        typed, offered = unknown[1].split("=", 1)[0], sorted(_option_strings(parser))
        went = MOVED_OPTIONS.get(typed) if parser.prog.split()[0] == "lifeline" else None
        if went is not None:
            return f"{message}; that is lifeline-context's option: {went} (docs/migration.md)"
    # an option of another command is no typo: naming it again would not help
    bare = {o.lstrip("-"): o for o in offered if o != typed}
    close = difflib.get_close_matches(typed.lstrip("-"), list(bare), n=1, cutoff=0.6)
    if close:
        if " (choose from" in message:
            message = message[: message.index(" (choose from")]
        message = f"{message}; did you mean `{bare[close[0]]}`?"
    return f"{message}; {takes}" if takes else message


def _unknown_before(parser: argparse.ArgumentParser, word: str) -> str | None:
    """The unknown option just before ``word`` in what ``parser`` was given, if any: then
    ``word`` is that option's value, not a mistyped command."""
    argv = list(getattr(parser, "_argv", ()))
    at = argv.index(word) if word in argv else 0
    before = argv[at - 1] if at else ""
    if before.startswith("-") and before.split("=", 1)[0] not in _option_strings(parser):
        return before
    return None


def _subcommands(parser: argparse.ArgumentParser) -> argparse._SubParsersAction[Any] | None:
    found = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return found[0] if found else None


def _unknown_subcommand(
    parser: argparse.ArgumentParser, action: argparse._SubParsersAction[Any], word: str
) -> tuple[str, str]:
    """A command that runs on its own and has subcommands too (`mcp`): a word it does not
    know is an unknown subcommand, and what it takes (its subcommands' help) is said."""
    known = ", ".join(f"`{c}`" for c in action.choices)
    takes = action.help or f"`{parser.prog}` runs without one, or takes {known}"
    return f"unknown {parser.prog.split()[-1]} subcommand {word!r}", takes


def _option_strings(parser: argparse.ArgumentParser) -> set[str]:
    """The options of ``parser`` itself (not of its subcommands')."""
    return {o for action in parser._actions for o in action.option_strings}


def _version_action(first: str, details: Callable[[], Sequence[str]]) -> type[argparse.Action]:
    """``--version``: ``first`` (program and package version), then ``details()`` (the store
    schema every line gets, the sync protocol...), worked out only when asked: reading the
    schema's entry points costs ~50 ms that other commands need not pay."""

    class _Version(argparse.Action):
        def __call__(self, parser: argparse.ArgumentParser, *_: object, **__: object) -> None:
            print("\n".join([first, *details()]))  # stdout, as argparse's own version action
            parser.exit(0)

    return _Version


def store_details() -> list[str]:
    """The store schema a line opened by this installation gets: each component's version."""
    from lifeline.store.schema import line_schema

    parts = (f"{name} {steps[-1][0]}" for name, steps in line_schema().items() if steps)
    return [f"store schema: {', '.join(parts)}", f"python {sys.version.split()[0]}"]


def make_parser(
    prog: str,
    description: str,
    version: str,
    modules: Sequence[ModuleType],
    *,
    line_option: bool = True,
    version_details: Callable[[], Sequence[str]] = store_details,
) -> argparse.ArgumentParser:
    """A CLI whose commands come from ``modules`` (each has ``register(sub, parent)``);
    without ``line_option`` only the commands that add ``--line`` themselves take it."""
    parent = global_options(line=line_option)
    parser = _Parser(prog=prog, description=description, parents=[parent])
    parser.add_argument(
        "--version",
        action=_version_action(f"{prog} {version}", version_details),
        nargs=0,
        default=argparse.SUPPRESS,
        help="show the version and the store schema (and sync protocol) it uses, and exit",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for module in modules:
        module.register(sub, parent)
    _add_completion(sub, parser, prog)
    return parser


SHELLS = ("bash", "zsh", "tcsh")


def _add_completion(
    sub: argparse._SubParsersAction[Any],
    parser: argparse.ArgumentParser,
    prog: str,
) -> None:
    """``PROG completion SHELL``: a completion script made from this very parser, so it
    always offers the commands and options of the installed version."""
    comp = sub.add_parser(
        "completion",
        help="print a shell completion script (bash, zsh or tcsh)",
        description=(
            f"Print a completion script for {prog}'s commands and options. bash: "
            f'`eval "$({prog} completion bash)"` in ~/.bashrc; zsh: '
            f"`{prog} completion zsh > ~/.zfunc/_{prog}` with ~/.zfunc on $fpath."
        ),
    )
    comp.add_argument("shell", choices=SHELLS)

    async def print_script(args: argparse.Namespace) -> int:
        import shtab

        print(shtab.complete(parser, shell=args.shell))
        return 0

    comp.set_defaults(func=print_script)


def command_word(argv: Sequence[str]) -> str | None:
    """The command a command line names, past the global options; None when it is not
    plain (help, version, an abbreviated option...): then every module is loaded."""
    words = iter(argv)
    for word in words:
        if word in _TAKES_VALUE:
            next(words, None)
        elif word.startswith(tuple(f"{o}=" for o in _TAKES_VALUE)) or word in ("-v", "--verbose"):
            continue
        else:
            return None if word.startswith("-") else word
    return None


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The `lifeline` parser: every command, or, when ``argv`` names a command of
    :data:`LIGHT_COMMANDS`, only its module's (the same parser for that command line)."""
    names = COMMAND_MODULES
    command = None if argv is None else command_word(argv)
    if command in LIGHT_COMMANDS:
        names = [LIGHT_COMMANDS[command]]
    return make_parser(
        "lifeline",
        "The project's reasoning ledger: record why the software is what it is.",
        __version__,
        [importlib.import_module(f"lifeline.cli.{name}") for name in names],
    )


def main(argv: Sequence[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    # pydantic scans every installed package's entry points for its plugins when the first
    # model is built (the sessions' models, on every `sessions` command); lifeline uses none.
    # Who sets the variable keeps their choice.
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    command = command_word(argv)
    if command is not None and (moved := moved_message("lifeline", command)) is not None:
        print(moved, file=sys.stderr)  # a lifeline-context command: where it went
        exit_process(0 if command in PASSING else 2)
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    exit_process(run(args, prog="lifeline"))


def exit_process(code: int) -> NoReturn:
    """End the command's process with ``code``, skipping the interpreter's last pass of the
    cycle collector over everything the command built: a bundle of a 5,000-turn session
    leaves ~40,000 items behind, and walking them at exit took 0.5–0.7 s of a 1.6 s
    process (decision 0086). Frozen objects are simply left to the operating system, as
    everything else at exit; each store was already closed by its command."""
    gc.freeze()
    sys.exit(code)


def _run_command(args: argparse.Namespace) -> int:
    """``args.func`` run. A read that must first fold the whole line into the truth tables
    (the first after an upgrade that changed them: ~2 minutes at a million entries), or
    index it for a hub's recall (decision 0109), shows how far it is on a terminal
    (lifeline.truth.table.SHOWN_FOLD)."""
    from lifeline.cli.progress import progress_for
    from lifeline.truth.progress import set_fold_progress

    bar = progress_for(
        args, "bringing the read tables up to date (after an upgrade or a large load)"
    )

    def shown(done: int, total: int) -> None:
        bar.update(done, total)
        if done >= total:
            bar.close()  # what the command prints next starts on a clean line

    set_fold_progress(shown if bar.enabled else None)
    try:
        return int(asyncio.run(args.func(args)))
    finally:
        bar.close()
        set_fold_progress(None)


def _our_error(group: BaseExceptionGroup[BaseException]) -> str | None:
    """The line for the first error in ``group`` (nested groups included), when every leaf
    that is not a cancellation is one of ours or an OS error the machine caused (a full
    disk as `serve` starts); else None."""
    leaves: list[BaseException] = []
    pending: list[BaseException] = [group]
    while pending:
        exc = pending.pop(0)
        if isinstance(exc, BaseExceptionGroup):
            pending.extend(exc.exceptions)
        elif not isinstance(exc, asyncio.CancelledError):
            leaves.append(exc)
    told = [
        str(exc) if isinstance(exc, LifelineError) else _refused(exc)
        for exc in leaves
        if isinstance(exc, (LifelineError, OSError))
    ]
    if leaves and len(told) == len(leaves) and all(told):
        return told[0]
    return None


def _refused(exc: OSError) -> str | None:
    """The one line for an OS error the machine, not our code, caused; else None."""
    where = f" {exc.filename}" if exc.filename else ""
    if exc.errno in _CANNOT_WRITE:
        return f"cannot write{where}: {exc.strerror}; {_CANNOT_WRITE[exc.errno]}"
    if where and exc.errno in _PATH_REFUSED:
        return f"cannot use{where}: {exc.strerror}; {_PATH_REFUSED[exc.errno]}"
    return None


def run(args: argparse.Namespace, *, prog: str = "lifeline") -> int:
    verbose = bool(getattr(args, "verbose", False))
    configure_logging(verbose=verbose, log_format=getattr(args, "log_format", "text"))
    try:
        code: int = _run_command(args)
        sys.stdout.flush()
        return code
    except LifelineError as exc:
        if verbose:
            raise
        # a peer's reason, a file's or a transcript's text may be quoted in it (decision 0128)
        print(f"{prog}: error: {error_text(str(exc))}", file=sys.stderr)
        return 2
    except ExceptionGroup as group:
        # A task of a TaskGroup failed (serve's parts start side by side): our own error
        # inside is still one line; anything else stays a traceback.
        ours = _our_error(group)
        if verbose or ours is None:
            raise
        print(f"{prog}: error: {error_text(ours)}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # The reader (e.g. `head`) went away: stop quietly, as other Unix tools do.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except OSError as exc:
        told = None if verbose else _refused(exc)
        if told is None:
            raise
        print(f"{prog}: error: {error_text(told)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
