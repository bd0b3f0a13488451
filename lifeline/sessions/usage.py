"""Token usage and its cost, per session, day, model, project or agent tool (decision 0069).

Read from the sessions index (:mod:`lifeline.sessions.index`): every usage row is a delta of
what the transcript recorded, so a session's rows sum to its own final totals (Codex's last
``total_token_usage``, the final usage of each Claude response, the sum of Gemini's
``tokens``), in the one vocabulary of :class:`~lifeline.sessions.messages.Tokens`. Days are
UTC days of the recorded times. Cost is summed per model from the price table; tokens of a
model the table does not know are counted, shown, and named as unpriced.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from lifeline.errors import ConfigError
from lifeline.sessions.index import SessionIndex
from lifeline.sessions.messages import Tokens
from lifeline.sessions.prices import PriceTable
from lifeline.sessions.scope import scope_matches

__all__ = ["GROUPS", "UsageLine", "UsageReport", "usage_report"]

# --by: the key of a row, as SQL over a usage sum (u: hid, day, model, counts; day and
# model "" when not recorded) and its session (s)
GROUPS = {
    "session": "u.hid",
    "day": "CASE WHEN u.day = '' THEN coalesce(substr(s.started, 1, 10), '?') ELSE u.day END",
    "model": "CASE WHEN u.model = '' THEN '?' ELSE u.model END",
    "project": "coalesce(s.scope, 'unknown:')",
    "tool": "s.tool",
}
_COUNTS = "input, cached, cache_write, output, reasoning"


@dataclass
class UsageLine:
    key: str
    label: str  # the session's title for --by session, else the key
    tokens: Tokens = field(default_factory=Tokens)
    cost: float = 0.0  # of the priced tokens only
    unpriced: dict[str, int] = field(default_factory=dict)  # model -> tokens without a price
    sessions: int = 0

    def as_json(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "label": self.label,
            "sessions": self.sessions,
            "tokens": self.tokens.as_json(),
            "cost": round(self.cost, 6),
            "unpriced": dict(sorted(self.unpriced.items())),
        }


@dataclass
class UsageReport:
    by: str
    lines: list[UsageLine]
    total: UsageLine
    prices_as_of: str
    currency: str

    def as_json(self) -> dict[str, Any]:
        return {
            "by": self.by,
            "currency": self.currency,
            "prices_as_of": self.prices_as_of,
            "rows": [line.as_json() for line in self.lines],
            "total": self.total.as_json(),
        }


def _source(since: str | None) -> tuple[str, list[Any]]:
    """The usage rows to add up: the per-part sums (a few rows a part), and when ``since``
    falls inside a day, that day's own rows from ``since`` on (the sums cannot split it)."""
    sums = f"SELECT hid, day, model, {_COUNTS} FROM usage_sums"
    if not since:
        return sums, []
    day, within = since[:10], since[10:] not in ("", "T00:00:00")
    if not within:
        return f"{sums} WHERE day >= ? OR day = ''", [day]
    raw = f"SELECT hid, day, coalesce(model, ''), {_COUNTS} FROM usage WHERE day = ? AND ts >= ?"
    return f"{sums} WHERE day > ? OR day = '' UNION ALL {raw}", [day, day, since]


def _where(
    index: SessionIndex, since: str | None, tool: str | None, project: str | None
) -> tuple[str, list[Any]]:
    args: list[Any] = []
    sql = " WHERE s.current = 1"
    if since:  # rows without a time count from their session's start
        sql, args = sql + " AND (u.day <> '' OR coalesce(s.started, '') >= ?)", [since]
    if tool:
        sql, args = sql + " AND s.tool = ?", [*args, tool]
    if project:  # the scope or inside it, by the one rule of `--scope` (scope_matches)
        scopes = [
            scope
            for (scope,) in index.db.execute("SELECT DISTINCT scope FROM sessions")
            if isinstance(scope, str) and scope_matches(scope, project)
        ]
        sql += " AND s.scope IN (SELECT value FROM json_each(?))"
        args.append(json.dumps(scopes))
    return sql, args


def usage_report(
    index: SessionIndex,
    prices: PriceTable,
    *,
    by: str = "day",
    since: str | None = None,
    tool: str | None = None,
    project: str | None = None,
) -> UsageReport:
    """Rows of ``by`` (oldest day first; else the largest total first) and their total."""
    if by not in GROUPS:
        raise ConfigError(f"cannot group usage by {by!r}; choose one of {', '.join(GROUPS)}")
    key = GROUPS[by]
    source, source_args = _source(since)
    where, args = _where(index, since, tool, project)
    rows = index.db.execute(
        f"SELECT {key}, u.model, u.hid, sum(u.input), sum(u.cached), sum(u.cache_write),"
        f" sum(u.output), sum(u.reasoning) FROM ({source}) u"
        f" JOIN sessions s ON s.hid = u.hid{where} GROUP BY 1, 2, 3",
        [*source_args, *args],
    ).fetchall()
    lines: dict[str, UsageLine] = {}
    total = UsageLine("total", "total")
    members: dict[str, set[str]] = {}
    everyone: set[str] = set()
    for group, model, hid, *sums in rows:
        tokens = Tokens(*(int(v or 0) for v in sums))
        line = lines.setdefault(str(group), UsageLine(str(group), str(group)))
        members.setdefault(line.key, set()).add(hid)
        everyone.add(hid)
        price = prices.price(model or None)
        for target in (line, total):
            target.tokens = target.tokens + tokens
            if price is None:
                name = model or "(no model recorded)"
                target.unpriced[name] = target.unpriced.get(name, 0) + tokens.total
            else:
                target.cost += price.cost(tokens)
    for line in lines.values():
        line.sessions = len(members.get(line.key, ()))
    total.sessions = len(everyone)
    if by == "session":
        for hid, title, tool_ in index.db.execute(
            "SELECT hid, title, tool FROM sessions WHERE current = 1"
        ):
            if hid in lines:
                lines[hid].label = f"{tool_} {(title or '(untitled)')[:60]}"
    ordered = sorted(
        lines.values(),
        key=(lambda x: x.key) if by == "day" else (lambda x: (-x.tokens.total, x.key)),
    )
    return UsageReport(by, ordered, total, prices.as_of, prices.currency)
