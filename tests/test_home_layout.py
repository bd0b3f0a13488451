"""Who owns ``.lifeline/``: only ``lifeline/home.py`` and ``lifeline_mesh/home/node_home.py``
name files under it (AST), and the layout they name is the one existing projects have."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from lifeline.home import Home
from lifeline_mesh.home.node_home import NodeHome

REPO = Path(__file__).resolve().parent.parent
HOMES = {"lifeline/home.py", "lifeline_mesh/home/node_home.py"}
# A string that is a path under .lifeline/ (".lifeline", ".lifeline/mesh/x.json"), not a
# sentence that mentions one in a message.
DOT_LIFELINE = re.compile(r"^\.lifeline(/[\w.<>-]+)*/?$")
FILE_NAME = re.compile(r"^[\w.-]+\.(json|db|pem|key|sqlite|lock|md|txt)$")
# What a path is built with: `a / "name"`, Path("name"), p.joinpath("name"), p.with_name(…).
PATH_CALLS = {"Path", "PurePath", "joinpath", "with_name"}


def _sources() -> list[Path]:
    found = [
        *REPO.joinpath("lifeline").rglob("*.py"),
        *REPO.joinpath("lifeline_mesh").rglob("*.py"),
    ]
    return sorted(p for p in found if "_pb2" not in p.name)


def _layout_names() -> set[str]:
    """The file and folder names the two homes give (their string constants)."""
    names = {"mesh", "ci"}
    for rel in HOMES:
        for node in ast.walk(ast.parse((REPO / rel).read_text(encoding="utf-8"))):
            text = node.value if isinstance(node, ast.Constant) else None
            if isinstance(text, str) and (FILE_NAME.match(text) or text.startswith(".")):
                names.add(text)
    # LIFELINE.md and LIFELINE.<line>.md live beside .lifeline/; .git marks a repository
    return names - {".", ".md", ".git"}


def _strings(node: ast.AST) -> list[str]:
    """The literal text of a string or f-string (its constant parts)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.JoinedStr):
        return [v.value for v in node.values if isinstance(v, ast.Constant)]
    return []


def _is_layout_name(text: str, names: set[str]) -> bool:
    return text in names


def layout_findings(source: str, names: set[str]) -> list[str]:
    """Where ``source`` builds a path under ``.lifeline/`` or names one of its files."""
    found: list[str] = []
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if DOT_LIFELINE.match(node.value):
                found.append(f"line {node.lineno}: {node.value!r}")
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            for side in (node.left, node.right):
                if any(_is_layout_name(t, names) for t in _strings(side)):
                    found.append(f"line {node.lineno}: / {ast.unparse(side)}")
        elif isinstance(node, ast.Call):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if called in PATH_CALLS:
                for arg in node.args:
                    if any(_is_layout_name(t, names) for t in _strings(arg)):
                        found.append(f"line {node.lineno}: {called}({ast.unparse(arg)})")
        elif isinstance(node, ast.ImportFrom) and node.module in (
            "lifeline.home",
            "lifeline_mesh.home.node_home",
        ):
            extra = [a.name for a in node.names if a.name not in ("Home", "NodeHome")]
            if extra:
                found.append(f"line {node.lineno}: imports {extra} from {node.module}")
    for stmt in tree.body:  # a module-level constant holding a layout name: `PEERS_FILE = …`
        value = stmt.value if isinstance(stmt, ast.Assign) else None
        texts = _strings(value) if value is not None else []
        if any(_is_layout_name(t, names) and t not in ("mesh", "ci") for t in texts):
            found.append(f"line {stmt.lineno}: {ast.unparse(stmt)}")
    return found


def test_only_the_homes_name_files_under_dot_lifeline() -> None:
    names = _layout_names()
    offenders = {}
    for path in _sources():
        rel = path.relative_to(REPO).as_posix()
        if rel in HOMES:
            continue
        found = layout_findings(path.read_text(encoding="utf-8"), names)
        if found:
            offenders[rel] = found
    assert offenders == {}, "ask Home/NodeHome for the path instead"


@pytest.mark.parametrize(
    "source",
    [
        'p = root / ".lifeline" / "ledger.db"',
        'p = Path(".lifeline/mesh")',
        'p = mesh / "peers.json"',
        'p = home.dir / f"{name}.projection.json"',
        'p = folder.joinpath("node.key")',
        'PEERS_FILE = "peers.json"',
        "from lifeline.home import LEDGER_DIR",
    ],
)
def test_the_layout_check_catches_a_path_built_outside_the_homes(source: str) -> None:
    assert layout_findings(source, _layout_names())


def test_the_layout_check_leaves_messages_and_other_files_alone() -> None:
    source = (
        'raise ConfigError(f"{path}: raise limits in .lifeline/config.json")\n'
        'meta = path.with_suffix(".meta.json")\n'
        'out = folder / "index.md"\n'
    )
    assert layout_findings(source, _layout_names()) == []


def test_the_homes_name_the_layout_existing_projects_have(tmp_path: Path) -> None:
    home = NodeHome(tmp_path)
    d = ".lifeline"
    expected = {
        home.dir: d,
        home.settings_path: f"{d}/config.json",
        home.ignore_path: f"{d}/.gitignore",
        home.sources_path: f"{d}/sessions-sources.sqlite",
        home.line_path("ledger"): f"{d}/ledger.db",
        Home.render_record_path(home.line_path("notes")): f"{d}/notes.projection.json",
        home.projection_path("ledger"): "LIFELINE.md",
        home.projection_path("notes"): "LIFELINE.notes.md",
        home.policy_path: f"{d}/policy.json",
        home.mesh_dir: f"{d}/mesh",
        home.config_path: f"{d}/mesh/config.json",
        home.key_path: f"{d}/mesh/node.key",
        home.state_path: f"{d}/mesh/state.json",
        home.serve_lock_path: f"{d}/mesh/serve.lock",
        home.inbound_path: f"{d}/mesh/inbound.json",
        home.peers_path: f"{d}/mesh/peers.json",
        home.ca_cert_path: f"{d}/mesh/ca.pem",
        home.ca_key_path: f"{d}/mesh/ca.key",
        home.tls_cert_path: f"{d}/mesh/tls.pem",
        home.tls_key_path: f"{d}/mesh/tls.key",
        home.members_path: f"{d}/mesh/members.json",
        home.revocations_path: f"{d}/mesh/revocations.json",
        home.invites_path: f"{d}/mesh/invites.json",
        home.membership_lock_path: f"{d}/mesh/.membership.lock",
        home.proposals_path: f"{d}/mesh/proposals.db",
        home.mcp_tokens_path: f"{d}/mesh/mcp-tokens.json",
        home.ci_dir: f"{d}/ci",
        home.ci_job_path: f"{d}/ci/job.txt",
        home.ci_context_path: f"{d}/ci/lifeline-context.md",
        home.ci_unsynced_path("ledger"): f"{d}/ci/unsynced-ledger.md",
    }
    assert {home.relative(path): rel for path, rel in expected.items()} == {
        rel: rel for rel in expected.values()
    }
    assert home.committable() == {f"{d}/.gitignore", f"{d}/config.json"}


def test_a_home_is_found_upward_and_stops_at_a_repository(tmp_path: Path) -> None:
    (tmp_path / ".lifeline").mkdir()
    deep = tmp_path / "a" / "b"
    deep.mkdir(parents=True)
    assert Home.find(deep).root == tmp_path
    (tmp_path / "a" / ".git").mkdir()
    assert Home.find(deep) == Home(deep)  # a repository's root ends the search
