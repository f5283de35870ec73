"""Checks of a config against the env it runs on (its :class:`~evohpo.envs.spec.EnvSpec`),
made once when a run is set up, and the team plan they resolve.

:func:`check` runs them all; :func:`playing_teams` and :func:`fitness_agents` are the one place
where a run's teams and scored agents are worked out.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from evohpo.envs.spec import EnvSpec
from evohpo.envs.teams import Teams
from evohpo.errors import ConfigError


def fitness_agents(chosen: Sequence[str] | None, spec: EnvSpec) -> list[str]:
    """The agents whose returns make up fitness (``eval.fitness_agents``; None: every agent)."""
    if chosen is None:
        return list(spec.agents)
    unknown = [a for a in chosen if a not in spec.agents]
    if unknown or not chosen:
        raise ConfigError(f"config key 'eval.fitness_agents': {chosen} must name agents of "
                          f"{spec.name}: {', '.join(spec.agents)}")
    return list(chosen)


def playing_teams(cfg: Any, spec: EnvSpec) -> Teams | None:
    """The teams that evolve apart, each its own population scored by cross-play
    (``games.teams: auto`` on a game of several teams); None: one population whose members
    drive every agent."""
    teams: dict[str, tuple[str, ...]] = getattr(spec, "teams", None) or {}
    if cfg.games.teams == "joint" or len(teams) < 2:
        value = cfg.games.scripted_opponents
        if value != 0:
            raise ConfigError(f"config key 'games.scripted_opponents': {value} needs a game of "
                              "several teams and games.teams: auto; "
                              f"{spec.name} plays as one team here; set it to 0")
        return None
    return [(name, tuple(agents)) for name, agents in teams.items()]


def keeps_next_actions(cfg: Any, teams: Teams | None) -> bool:
    """Whether the replay memory keeps each step's next actions as played: the playing teams
    (None in a joint run) take the other teams' next actions as played."""
    return bool(teams) and cfg.games.opponent_actions == "played"


def check(cfg: Any, spec: EnvSpec) -> None:
    """Every check of ``cfg`` that needs the env's spec (ConfigError on the first that fails)."""
    fitness_agents(cfg.eval.fitness_agents, spec)
    p = cfg.games.scripted_opponents
    if playing_teams(cfg, spec) and p:
        from evohpo.envs.heuristics import heuristic_policy

        heuristic_policy(
            spec, cfg.env.name, cfg.env.kwargs,
            f"the scripted heuristic of config key 'games.scripted_opponents' ({p})",
            "set it to 0")
