"""The first generation: the preset or a sample of the search space, team after team."""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

from evohpo.algos import build_algo
from evohpo.config import Config
from evohpo.envs.spec import EnvSpec
from evohpo.evolve import space
from evohpo.evolve.lineage import MutationRecord
from evohpo.evolve.member import Member, child_seed


def make_population(cfg: Config, spec: EnvSpec, rng: np.random.Generator, device: torch.device,
                    teams: list[str] | None = None) -> tuple[list[Member], list[MutationRecord]]:
    """The first generation (``population.init``: the preset, or a sample of the search space)
    and a ``birth`` record per member with its starting hyperparameters and hidden sizes.

    With ``teams``, ``population.size`` members per team, team after team (ids go on counting).
    """
    members: list[Member] = []
    records: list[MutationRecord] = []
    team_names: list[str | None] = list(teams) if teams else [None]
    for team in team_names:
        _add_team(cfg, spec, rng, device, team, members, records)
    return members, records


def _add_team(cfg: Config, spec: EnvSpec, rng: np.random.Generator, device: torch.device,
              team: str | None, members: list[Member], records: list[MutationRecord]) -> None:
    for start in space.starts(cfg, rng):
        i = len(members)
        seed = child_seed(rng)
        own = dataclasses.replace(cfg, algo=dataclasses.replace(
            cfg.algo, hidden=start.hidden, **start.hyperparams)) if start.sampled else cfg
        algo = build_algo(own, spec, seed, device)
        if team is not None and cfg.games.opponent_actions == "played":
            # the other teams' next actions as played: it trains its own team's agents only
            algo.learners = tuple(spec.teams[team])
        members.append(Member(id=i, parent_id=None, algo=algo, rng=np.random.default_rng(seed),
                              team=team))
        records.append(MutationRecord(0, i, None, "birth", target="hyperparameters",
                                      after={**start.hyperparams, "hidden": start.hidden},
                                      op="sample" if start.sampled else "preset", team=team))
