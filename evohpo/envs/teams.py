"""Teams: which agents play together. A competitive game has two or more teams; a cooperative one
has one.

mpe2's competitive envs name their sides: adversaries (``adversary_*``, ``leadadversary_*``,
``eve_*`` in simple_crypto) against the good agents (the rest). ``env.teams`` overrides the
derived teams with agent names or glob patterns, e.g. ``{predators: [adversary_*], prey:
[agent_*]}``. Env specs carry their teams (:attr:`evohpo.envs.spec.EnvSpec.teams`);
:func:`evohpo.envs.spec_for` gives the spec of a run's env with its teams resolved.
"""

from __future__ import annotations

import dataclasses
import fnmatch
from collections.abc import Mapping, Sequence

from evohpo.envs.spec import ONE_TEAM, EnvSpec
from evohpo.errors import ConfigError

# the playing teams of a run, (team name, its agents) in the env's team order
# (evohpo.config.checks.playing_teams resolves them)
Teams = list[tuple[str, tuple[str, ...]]]
# mpe2 short names of the competitive envs -> agent name prefixes of their adversaries
COMPETITIVE: dict[str, tuple[str, ...]] = {
    "simple_adversary": ("adversary_",),
    "simple_tag": ("adversary_",),
    "simple_push": ("adversary_",),
    "simple_world_comm": ("adversary_", "leadadversary_"),
    "simple_crypto": ("eve_",),
}


def derive_teams(name: str, agents: Sequence[str]) -> dict[str, tuple[str, ...]]:
    """The teams of env ``name``: mpe2's adversaries against its good agents in the competitive
    envs, one team ``"team"`` of every agent otherwise (cooperative mpe2 envs, module:factory
    envs, callables). Agents keep the env's order; a side without agents is left out."""
    if name not in COMPETITIVE:
        return {ONE_TEAM: tuple(agents)}
    prefixes = COMPETITIVE[name]
    adversaries = tuple(a for a in agents if a.startswith(prefixes))
    good = tuple(a for a in agents if not a.startswith(prefixes))
    return {team: members for team, members in (("adversaries", adversaries), ("good", good))
            if members}


def _bad(spec: EnvSpec, what: str) -> ConfigError:
    return ConfigError(f"config key 'env.teams': {what}; agents of {spec.name}: "
                       f"{', '.join(spec.agents)}")


def resolve_teams(spec: EnvSpec, given: Mapping[str, Sequence[str]] | None) -> EnvSpec:
    """``spec`` with the teams of ``env.teams``: team name -> agent names or fnmatch patterns.

    None keeps the probed (derived) teams. Every agent must fall in exactly one team, every
    pattern must match an agent and no team may be empty; each team lists its agents in the
    env's order.
    """
    if given is None:
        return spec
    if not given:
        raise _bad(spec, "{} names no team; give {team: [agents or patterns]} or null")
    owner: dict[str, str] = {}
    teams: dict[str, tuple[str, ...]] = {}
    for team, patterns in given.items():
        if not isinstance(team, str) or not team:
            raise _bad(spec, f"team name {team!r} is not a non-empty string")
        if isinstance(patterns, str) or not patterns:
            raise _bad(spec, f"team {team!r}: {patterns!r} is not a non-empty list of agent "
                             "names or patterns")
        chosen: set[str] = set()
        for pattern in patterns:
            hits = [a for a in spec.agents if fnmatch.fnmatchcase(a, str(pattern))]
            if not hits:
                raise _bad(spec, f"team {team!r}: {pattern!r} matches no agent")
            chosen.update(hits)
        for a in chosen:
            if owner.setdefault(a, team) != team:
                raise _bad(spec, f"agent {a!r} is in two teams, {owner[a]!r} and {team!r}")
        teams[team] = tuple(a for a in spec.agents if a in chosen)
    left = [a for a in spec.agents if a not in owner]
    if left:
        raise _bad(spec, f"{', '.join(repr(a) for a in left)} in no team "
                         f"(teams: {', '.join(teams)})")
    return dataclasses.replace(spec, teams=teams)


def team_of(spec: EnvSpec, agent: str) -> str:
    """The name of the team that ``agent`` plays for."""
    for team, agents in spec.team_list():
        if agent in agents:
            return team
    raise KeyError(f"agent {agent!r} is not an agent of {spec.name}: {', '.join(spec.agents)}")


def describe_teams(spec: EnvSpec) -> str:
    """'adversaries (adversary_0, adversary_1) vs good (agent_0)', or 'one team'."""
    teams = spec.team_list()
    if len(teams) == 1:
        return "one team"
    return " vs ".join(f"{team} ({', '.join(agents)})" for team, agents in teams)
