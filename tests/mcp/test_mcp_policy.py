"""The write policy: precedence of rules, and loud errors for a malformed file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from lifeline.errors import ConfigError
from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.mcp.policy import BUILTIN, Mode, Ruling, WritePolicy, load_policy

POLICY = {
    "default": "propose",
    "kinds": {"checkpoint": "direct", "release": "deny"},
    "agents": {
        "ci": "deny",
        "claude": {"default": "direct", "kinds": {"decision": "propose"}},
        "codex": {"kinds": {"note": "direct"}},
    },
}


@pytest.mark.parametrize(
    ("agent", "kind", "mode", "rule"),
    [
        ("someone", "note", Mode.PROPOSE, "default"),
        ("someone", "checkpoint", Mode.DIRECT, "kinds.checkpoint"),
        ("someone", "release", Mode.DENY, "kinds.release"),
        ("ci", "checkpoint", Mode.DENY, "agents.ci"),
        ("claude", "note", Mode.DIRECT, "agents.claude"),
        ("claude", "decision", Mode.PROPOSE, "agents.claude.kinds.decision"),
        ("claude", "release", Mode.DIRECT, "agents.claude"),
        ("codex", "note", Mode.DIRECT, "agents.codex.kinds.note"),
        ("codex", "release", Mode.DENY, "kinds.release"),
        ("codex", "fix", Mode.PROPOSE, "default"),
    ],
)
def test_most_specific_rule_wins(agent: str, kind: str, mode: Mode, rule: str) -> None:
    ruling = WritePolicy.parse(POLICY, source="t").decide(agent, kind)
    assert (ruling.mode, ruling.rule) == (mode, rule)


@pytest.mark.parametrize(
    ("data", "says"),
    [
        ([], "must be a JSON object"),
        ({"default": "allow"}, "'allow'; use one of: direct, propose, deny"),
        ({"defualt": "direct"}, "unknown key 'defualt'"),
        ({"kinds": ["note"]}, "kinds must be an object"),
        ({"kinds": {"note": True}}, "kinds.note is True"),
        ({"agents": {"ci": 3}}, "agents.ci must be a mode or an object"),
        ({"agents": {"ci": {"mode": "deny"}}}, "unknown key 'mode'"),
        ({"agents": {"ci": {"kinds": {"note": "yes"}}}}, "agents.ci.kinds.note is 'yes'"),
        ({"agents": "deny"}, "agents must be an object"),
    ],
)
def test_malformed_policy_is_a_config_error(data: Any, says: str) -> None:
    with pytest.raises(ConfigError) as info:
        WritePolicy.parse(data, source="policy.json")
    assert says in str(info.value)
    assert "policy.json" in str(info.value)


def test_no_file_means_the_builtin_policy(tmp_path: Path) -> None:
    assert load_policy(NodeHome(tmp_path)) is BUILTIN
    assert BUILTIN.decide("any", "decision").mode is Mode.PROPOSE
    assert BUILTIN.decide("any", "checkpoint").mode is Mode.DIRECT


def test_file_is_read_and_bad_json_is_loud(tmp_path: Path) -> None:
    path = NodeHome(tmp_path).policy_path
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"default": "deny"}))
    assert load_policy(NodeHome(tmp_path)).decide("a", "note").mode is Mode.DENY
    path.write_text('{"default": "direct",')
    with pytest.raises(ConfigError, match="is not valid JSON"):
        load_policy(NodeHome(tmp_path))


def test_an_agent_s_rules_as_lifeline_context_wrote_them_are_read() -> None:
    """Its `init --agent` wrote an agent's rules as kind -> mode, "*" for the rest; a file
    it wrote used to be refused here ("unknown keys 'checkpoint', 'feature'...")."""
    policy = WritePolicy.parse(
        {
            "default": "propose",
            "kinds": {"checkpoint": "direct"},
            "agents": {
                "claude-code": {"checkpoint": "direct", "note": "direct", "fix": "direct"},
                "untrusted-bot": {"*": "deny", "note": "propose"},
            },
        },
        source="policy.json",
    )
    decide = policy.decide
    assert decide("claude-code", "note") == Ruling(Mode.DIRECT, "agents.claude-code.kinds.note")
    assert decide("claude-code", "decision") == Ruling(Mode.PROPOSE, "default")
    assert decide("untrusted-bot", "note").mode is Mode.PROPOSE
    assert decide("untrusted-bot", "checkpoint") == Ruling(Mode.DENY, "agents.untrusted-bot")
    with pytest.raises(ConfigError, match=r"agents.a.\* is 'allow'"):
        WritePolicy.parse({"agents": {"a": {"*": "allow"}}}, source="policy.json")
