"""What an env is to the learners: :class:`EnvSpec` records each agent's observation size and
action space, keyed by agent id, and the env's teams. Agents are heterogeneous (speaker and
listener differ), so nothing assumes equal shapes.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

import numpy as np

# the name of the one team of a cooperative env (every agent)
ONE_TEAM = "team"


@dataclass(frozen=True)
class AgentSpec:
    obs_dim: int
    discrete: bool
    act_dim: int  # number of actions (discrete) or action vector length (continuous)
    low: float = 0.0
    high: float = 1.0


class Team(NamedTuple):
    name: str
    agents: tuple[str, ...]


@dataclass(frozen=True)
class EnvSpec:
    name: str
    agents: tuple[str, ...]
    per_agent: dict[str, AgentSpec]
    # team name -> its agents in env order (evohpo.envs.teams); empty: not resolved, one team. Not
    # compared: two specs are equal when their spaces are
    teams: dict[str, tuple[str, ...]] = field(default_factory=dict, compare=False)
    # observations stacked per agent (env.frames): the current one, then the frames - 1 before it
    frames: int = 1

    def __getitem__(self, agent: str) -> AgentSpec:
        return self.per_agent[agent]

    def team_list(self) -> list[Team]:
        """The teams in order: one named "team" with every agent when none are resolved."""
        if not self.teams:
            return [Team(ONE_TEAM, self.agents)]
        return [Team(name, agents) for name, agents in self.teams.items()]

    def frame_dim(self, agent: str) -> int:
        """The size of one of the agent's observations as the env gives it."""
        return self.per_agent[agent].obs_dim // self.frames

    def stacked(self, frames: int) -> EnvSpec:
        """This env's spec with each agent's last ``frames`` observations side by side."""
        base = self.unstacked()
        per = {a: dataclasses.replace(s, obs_dim=s.obs_dim * frames)
               for a, s in base.per_agent.items()}
        return dataclasses.replace(base, per_agent=per, frames=frames)

    def unstacked(self) -> EnvSpec:
        """The spec of one observation per agent, as the env gives it."""
        if self.frames == 1:
            return self
        per = {a: dataclasses.replace(s, obs_dim=self.frame_dim(a))
               for a, s in self.per_agent.items()}
        return dataclasses.replace(self, per_agent=per, frames=1)

    def describe(self) -> str:
        parts = []
        for a in self.agents:
            s = self.per_agent[a]
            act = (f"Discrete({s.act_dim})" if s.discrete
                   else f"Box[{s.low:g},{s.high:g}]^{s.act_dim}")
            obs = (f"{s.obs_dim}" if self.frames == 1
                   else f"{s.obs_dim} ({self.frames} frames of {self.frame_dim(a)})")
            parts.append(f"{a}: obs {obs}, act {act}")
        return "; ".join(parts)


class Policy(Protocol):
    """Anything that gives actions for a batch of observations (an algorithm, a reference
    policy)."""

    def act(self, obs: dict[str, np.ndarray], rng: np.random.Generator | None,
            ) -> tuple[dict[str, np.ndarray], Any]: ...
