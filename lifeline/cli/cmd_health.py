"""`lifeline exam`: how well the line's context teaches a fresh agent, with the gaps."""

from __future__ import annotations

import argparse

from lifeline.cli.common import Commands, add_json_option, line_of, open_line, print_json
from lifeline.errors import ConfigError
from lifeline.truth.exam import CHECK_POINTS, SHOWN_GAPS, examine
from lifeline.truth.service import read_for_exam, resume_of
from lifeline.wording import one_line

__all__ = ["register"]


def _score(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if not 0 <= value <= 4 * CHECK_POINTS:
        raise argparse.ArgumentTypeError(f"{value} is not a score from 0 to {4 * CHECK_POINTS}")
    return value


def register(sub: Commands, parent: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "exam",
        parents=[parent],
        help="score what a fresh agent learns from the context (what, why, decided, next)",
    )
    p.add_argument("--min", type=_score, help="exit 1 when the score is below this (for CI)")
    p.add_argument(
        "--budget",
        metavar="N",
        help="refused: lifeline-context's exam built a context of N characters and probed it;"
        " this one scores the line's truth, which no budget cuts",
    )
    add_json_option(p)
    p.set_defaults(func=cmd_exam)


async def cmd_exam(args: argparse.Namespace) -> int:
    if args.budget is not None:
        raise ConfigError(
            "exam takes no --budget: it scores the line's truth (what, why, decided, next), "
            "not a context cut to a budget; drop --budget, and see what N characters keep "
            "with `lifeline context --budget N`"
        )
    async with open_line(args) as store:
        lt = await read_for_exam(store)  # not the whole state: bounded by what is in force
        exam = examine(lt.state, lt.truth, await resume_of(store))
    failed = args.min is not None and exam.score < args.min
    if args.json:
        print_json(exam.to_dict() | {"line": line_of(args)})
        return 1 if failed else 0
    print(f"context health of line {line_of(args)!r}: {exam.score}/{4 * CHECK_POINTS}")
    for check in exam.checks:
        print(f"  {check.name:<8} {check.score:>2}/{CHECK_POINTS}  {one_line(check.detail)}")
    gaps = [g for c in exam.checks for g in c.gaps[:SHOWN_GAPS]]
    if gaps:
        print("gaps:")
    for gap in gaps:
        print(f"  - {one_line(gap.message)}")
    for check in exam.checks:
        if len(check.gaps) > SHOWN_GAPS:
            print(f"  ... and {len(check.gaps) - SHOWN_GAPS} more '{check.name}' gaps (--json)")
    if failed:
        print(f"score {exam.score} is below --min {args.min}")
    return 1 if failed else 0
