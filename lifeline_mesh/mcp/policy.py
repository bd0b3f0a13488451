"""The write policy: may this agent write this kind directly, only propose it, or not at all.

The policy lives in ``NodeHome.policy_path`` (the same shape lifeline-context 0.6.1
wrote, so a project keeps its policy when it joins a mesh)::

    {
      "default": "propose",                      # any agent, any kind
      "kinds":   {"checkpoint": "direct"},       # any agent, this kind
      "agents":  {
        "ci":     "deny",                        # this agent, any kind
        "claude": {"default": "propose", "kinds": {"note": "direct"}}
      }
    }

An agent's rules may also be written as lifeline-context's ``init --agent`` wrote them,
kind -> mode with ``"*"`` for its other kinds (``{"note": "direct", "*": "deny"}``), when
every key is a known kind: a file it wrote keeps working.

The most specific rule wins: agent+kind, then agent, then kind, then default. With no file,
:data:`BUILTIN` applies (propose everything except checkpoints). A file that cannot be read
or does not have this shape is a :class:`~lifeline.errors.ConfigError` -- never a silent
"allow" -- so the server refuses to start and every write re-reads and re-checks it.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from lifeline.entry import KNOWN_KINDS
from lifeline.errors import ConfigError
from lifeline.wording import noun
from lifeline_mesh.home.node_home import NodeHome

__all__ = ["BUILTIN", "Mode", "PolicyDenied", "Ruling", "WritePolicy", "load_policy"]


class PolicyDenied(ConfigError):
    """The write policy refuses this agent this kind of entry."""


class Mode(enum.Enum):
    """What happens to a write."""

    DIRECT = "direct"  # recorded in the line at once
    PROPOSE = "propose"  # kept as a proposal until a human approves it
    DENY = "deny"  # refused


@dataclass(frozen=True, slots=True)
class Ruling:
    """The mode for one write and the rule that decided it (for error messages)."""

    mode: Mode
    rule: str


@dataclass(frozen=True, slots=True)
class _AgentRules:
    default: Mode | None = None
    kinds: Mapping[str, Mode] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class WritePolicy:
    """A parsed policy. Pure: :meth:`decide` does no I/O."""

    default: Mode = Mode.PROPOSE
    kinds: Mapping[str, Mode] = field(default_factory=dict)
    agents: Mapping[str, _AgentRules] = field(default_factory=dict)
    source: str = "built-in policy"

    def decide(self, agent: str, kind: str) -> Ruling:
        rules = self.agents.get(agent)
        if rules is not None:
            if kind in rules.kinds:
                return Ruling(rules.kinds[kind], f"agents.{agent}.kinds.{kind}")
            if rules.default is not None:
                return Ruling(rules.default, f"agents.{agent}")
        if kind in self.kinds:
            return Ruling(self.kinds[kind], f"kinds.{kind}")
        return Ruling(self.default, "default")

    @classmethod
    def parse(cls, data: Any, *, source: str) -> WritePolicy:
        """Build a policy from decoded JSON; any deviation from the shape is a ConfigError."""
        where = f"write policy {source}"
        if not isinstance(data, dict):
            raise ConfigError(f"{where} must be a JSON object, not {type(data).__name__}")
        _only_keys(data, {"default", "kinds", "agents"}, where)
        default = _mode(data.get("default", "propose"), f"{where}: default")
        kinds = _kind_map(data.get("kinds", {}), f"{where}: kinds")
        raw_agents = data.get("agents", {})
        if not isinstance(raw_agents, dict):
            raise ConfigError(f"{where}: agents must be an object of agent name -> rules")
        agents = {
            str(name): _agent_rules(value, f"{where}: agents.{name}")
            for name, value in raw_agents.items()
        }
        return cls(default=default, kinds=kinds, agents=agents, source=source)


# No policy file: agents propose, except checkpoints (where work stopped), recorded at once.
BUILTIN = WritePolicy(default=Mode.PROPOSE, kinds={"checkpoint": Mode.DIRECT})


# An agent's rules as lifeline-context 0.6.1 wrote them: {"note": "direct", "*": "deny"}.
_PREDECESSOR_KEYS = frozenset(KNOWN_KINDS) | {"*"}


def _only_keys(data: dict[str, Any], allowed: set[str], where: str) -> None:
    extra = sorted(set(data) - allowed)
    if extra:
        raise ConfigError(
            f"{where} has unknown {noun(len(extra), 'key')} {', '.join(map(repr, extra))}; "
            f"allowed: {', '.join(sorted(allowed))}"
        )


def _mode(value: Any, where: str) -> Mode:
    try:
        return Mode(value)
    except ValueError:
        raise ConfigError(f"{where} is {value!r}; use one of: direct, propose, deny") from None


def _kind_map(value: Any, where: str) -> dict[str, Mode]:
    if not isinstance(value, dict):
        raise ConfigError(f"{where} must be an object of kind -> mode, not {value!r}")
    return {str(kind): _mode(mode, f"{where}.{kind}") for kind, mode in value.items()}


def _agent_rules(value: Any, where: str) -> _AgentRules:
    if isinstance(value, str):
        return _AgentRules(default=_mode(value, where))
    if not isinstance(value, dict):
        raise ConfigError(f"{where} must be a mode or an object with default/kinds")
    if value and set(value) <= _PREDECESSOR_KEYS:
        # lifeline-context's form, as its `init --agent` wrote it: kind -> mode, and "*"
        # for the agent's other kinds. Only known kinds: a typo stays an error.
        kinds = {k: _mode(m, f"{where}.{k}") for k, m in value.items() if k != "*"}
        default = _mode(value["*"], f"{where}.*") if "*" in value else None
        return _AgentRules(default=default, kinds=kinds)
    _only_keys(value, {"default", "kinds"}, where)
    default = _mode(value["default"], f"{where}.default") if "default" in value else None
    return _AgentRules(default=default, kinds=_kind_map(value.get("kinds", {}), f"{where}.kinds"))


def load_policy(home: NodeHome) -> WritePolicy:
    """The project's policy, read now (so an edit applies to the next write)."""
    path = home.policy_path
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return BUILTIN
    except OSError as exc:
        raise ConfigError(f"cannot read write policy {path} ({exc}); fix its permissions") from exc
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ConfigError(
            f"write policy {path} is not valid JSON ({exc}); fix it (see docs/mcp.md)"
        ) from exc
    return WritePolicy.parse(data, source=str(path))
