"""Sessions and their continuation bundles as an Open Knowledge Format v0.2 bundle.

``lifeline sessions export --okf DIR`` writes a directory of markdown concepts with YAML
frontmatter (OKF v0.2, §3–§8):

- ``index.md`` (root, the only frontmatter: ``okf_version: "0.2"``) lists the concepts;
- ``sessions/<id>.md``: one ``type: Agent Session`` concept per session (tool, status and
  reason, scope, times, turns; its bundle linked);
- ``bundles/<key>/bundle.md`` (``type: Continuation Bundle``) and one concept per slice,
  ``bundles/<key>/<slice>.md`` (``type: Continuation Bundle Slice``), whose facts cite
  their sources as footnotes keyed to ``sources[].id`` (§5.1).

``generated`` is ``{by: lifeline/<version>, at: <the latest activity of the sessions>}`` and
``status`` is ``stable`` for a bundle that is ready, ``draft`` for one that is not (its
Acceptance slice says why). Nothing depends on the clock: the same line exports the same
files on every node. Frontmatter strings are written as double-quoted scalars (JSON string
syntax, which YAML reads as is).

The folder is written through :class:`lifeline.fsutil.NewTree`: each file is created new,
without following a link, so a link put in the folder while it is written (by whoever else
can write there) stops the export instead of having its target written over.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from lifeline import __version__
from lifeline.fsutil import NewTree
from lifeline.sessions.bundles.bundle import ORDER, Bundle, Source, slice_markdown
from lifeline.sessions.bundles.merge import groups_of
from lifeline.sessions.bundles.resume import BundleRequest, NotReady, build_bundle, stored_verdict
from lifeline.sessions.catalogue import Catalogue
from lifeline.sessions.model import Session
from lifeline.truth.budget import Budget
from lifeline.wording import count

__all__ = ["ExportReport", "export_okf"]

_ACTOR = f"lifeline/{__version__}"
_REFS = re.compile(r" \[(P\d+(?:, P\d+)*)\]$")


@dataclass(frozen=True, slots=True)
class ExportReport:
    sessions: int
    bundles: int
    files: int


def _label(text: str) -> str:
    """Text safe inside a markdown link's brackets."""
    return text.replace("[", "(").replace("]", ")")


def _q(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)


def _iso(ts: str | None) -> str | None:
    """An ISO 8601 instant with an explicit offset (OKF §5), or None."""
    if not ts or len(ts) < 19:
        return None
    return ts if ts.endswith("Z") or re.search(r"[+-]\d\d:\d\d$", ts) else ts + "Z"


def _frontmatter(fields: dict[str, Any]) -> str:
    lines = ["---"]
    for key, value in fields.items():
        if value is None or value == []:
            continue
        if isinstance(value, str):
            lines.append(f"{key}: {_q(value)}")
        elif key == "sources":
            lines.append("sources:")
            for entry in value:
                inner = ", ".join(f"{k}: {_q(str(v))}" for k, v in entry.items())
                lines.append(f"  - {{ {inner} }}")
        elif isinstance(value, list):
            lines.append(f"{key}: [{', '.join(_q(str(v)) for v in value)}]")
        elif isinstance(value, dict):
            inner = ", ".join(f"{k}: {_q(str(v))}" for k, v in value.items())
            lines.append(f"{key}: {{ {inner} }}")
    lines.append("---")
    return "\n".join(lines) + "\n\n"


def _source_entry(number: int, source: Source) -> dict[str, str]:
    first, last = source.lines
    return {
        "id": f"p{number}",
        "resource": f"lifeline:sessions/{source.session}#L{first}-L{last}",
        "title": f"{source.tool} session {source.session[:12]} lines {first}-{last} "
        f"(sha256 {source.sha256})",
        "author": f"process:{source.tool}",
    }


def _footnoted(text: str) -> tuple[str, list[int]]:
    """The slice's markdown with ``[P1, P3]`` marks turned into footnote references."""
    cited: list[int] = []
    out = []
    for line in text.splitlines():
        match = _REFS.search(line)
        if match:
            numbers = [int(p[1:]) for p in match.group(1).split(", ")]
            cited += numbers
            line = line[: match.start()] + "".join(f"[^p{n}]" for n in numbers)
        out.append(line)
    return "\n".join(out), sorted(set(cited))


def _generated(sessions: list[Session]) -> dict[str, str]:
    times = [t for s in sessions if (t := _iso(s.facts.last_activity or s.facts.started))]
    return {"by": _ACTOR, "at": max(times)} if times else {"by": _ACTOR}


def _write(tree: NewTree, relative: str, text: str, written: list[str]) -> None:
    tree.write(relative, text.encode("utf-8"))
    written.append(relative)


def _bundle_files(
    tree: NewTree, bundle: Bundle, sessions: list[Session], written: list[str]
) -> str:
    folder = f"bundles/{bundle.key}"
    numbers = {s: i for i, s in enumerate(bundle.sources(), start=1)}
    status = "stable" if bundle.ready else "draft"
    generated = _generated(sessions)
    texts = slice_markdown(bundle)
    listing = []
    for kind in ORDER:
        body, cited = _footnoted(texts[kind])
        by_number = {n: s for s, n in numbers.items()}
        sources = [_source_entry(n, by_number[n]) for n in cited]
        notes = [f"[^p{n}]: {_source_entry(n, by_number[n])['title']}" for n in cited]
        head = _frontmatter(
            {
                "type": "Continuation Bundle Slice",
                "title": f"{kind.value.capitalize()}: {bundle.topic}",
                "description": f"The {kind.value} slice of the bundle {bundle.key}.",
                "tags": [kind.value, "lifeline-sessions"],
                "status": status,
                "generated": generated,
                "sources": sources,
            }
        )
        tail = ("\n\n" + "\n".join(notes)) if notes else ""
        _write(tree, f"{folder}/{kind.value}.md", head + body + tail + "\n", written)
        listing.append(f"* [{kind.value.capitalize()}](/bundles/{bundle.key}/{kind.value}.md)")
    members = "\n".join(f"* [{s.id[:12]}](/sessions/{s.id[:16]}.md)" for s in sessions)
    head = _frontmatter(
        {
            "type": "Continuation Bundle",
            "title": bundle.topic,
            "description": f"What to resume {bundle.topic} from, in scope {bundle.scope}.",
            "tags": ["lifeline-sessions"],
            "status": status,
            "generated": generated,
        }
    )
    body = f"# Slices\n\n{chr(10).join(listing)}\n\n# Sessions merged\n\n{members}\n"
    _write(tree, f"{folder}/bundle.md", head + body, written)
    return f"* [{_label(bundle.topic)}](/bundles/{bundle.key}/bundle.md) - {status}, {bundle.scope}"


def _session_file(tree: NewTree, s: Session, key: str | None, written: list[str]) -> str:
    title = " ".join((s.facts.title or s.facts.first_prompt or "(untitled)").split())[:120]
    head = _frontmatter(
        {
            "type": "Agent Session",
            "title": title,
            "description": f"{s.tool.value} session, {s.status.status.value}: {s.status.reason}",
            "tags": [s.tool.value, s.status.status.value, "lifeline-sessions"],
            "generated": _generated([s]),
        }
    )
    facts = [
        f"* id: `{s.id}`",
        f"* tool: {s.tool.value} {s.facts.version or ''}".rstrip(),
        f"* native id: `{s.native_id}`",
        f"* scope: `{s.scope}`",
        f"* time: {s.facts.started or '?'} → {s.facts.last_activity or '?'}",
        f"* turns: {count(s.turns, 'real prompt')}, {count(s.item_count, 'item')}",
    ]
    if key is not None:
        facts.append(f"* continuation bundle: [{key}](/bundles/{key}/bundle.md)")
    _write(
        tree,
        f"sessions/{s.id[:16]}.md",
        head + "# Session\n\n" + "\n".join(facts) + "\n",
        written,
    )
    link = f"/sessions/{s.id[:16]}.md"
    return f"* [{_label(title[:60])}]({link}) - {s.tool.value}, {s.status.status.value}"


async def export_okf(catalogue: Catalogue, tree: NewTree, budget: Budget) -> ExportReport:
    """Write the line's sessions and one bundle per topic into ``tree`` (a new folder)."""
    summaries = [stored_verdict(catalogue, s) for s in catalogue.summaries()]
    written: list[str] = []
    bundle_rows: list[str] = []
    key_of: dict[str, str] = {}
    for group in sorted(groups_of(summaries), key=lambda g: g.key):
        req = BundleRequest(ref=group.sessions[0].id, budget=budget)
        try:
            bundle, _ = await build_bundle(catalogue, req)
        except NotReady as exc:
            if exc.bundle is None:
                continue
            bundle = exc.bundle
        bundle_rows.append(_bundle_files(tree, bundle, list(group.sessions), written))
        key_of.update({s.id: group.key for s in group.sessions})
    session_rows = [_session_file(tree, s, key_of.get(s.id), written) for s in summaries]
    index = (
        '---\nokf_version: "0.2"\n---\n\n# Continuation bundles\n\n'
        + "\n".join(bundle_rows)
        + "\n\n# Agent sessions\n\n"
        + "\n".join(session_rows)
        + "\n"
    )
    _write(tree, "index.md", index, written)
    return ExportReport(len(summaries), len(bundle_rows), len(written))
