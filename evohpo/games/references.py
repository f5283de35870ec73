"""Absolute progress on a game of several teams: each team's champion against fixed opponents.

Cross-play says who is better now, not whether the league improved. So every generation each
team's champion also plays fixed opponents, on the same episodes each time: a random policy,
the env's scripted heuristic where it has one, and the first generation's champions. Each of
those numbers sits beside the reference's own return in the champion's seat
(``vs/<team>/<ref>/ref``): the champion beats a reference when it does better against the
reference's team than the reference does.
"""

from __future__ import annotations

import contextlib
from typing import Any

import numpy as np
import torch

from evohpo.algos import Algorithm, restore_algo
from evohpo.config import Config
from evohpo.envs import VectorPool
from evohpo.envs.heuristics import fixed_references
from evohpo.envs.spec import EnvSpec, Policy
from evohpo.runtime import Runtime
from evohpo.runtime.evaluate import SEEDING, Teams, eval_pool, seat_return


class References:
    """The champions' play against the fixed references, generation after generation."""

    def __init__(self, cfg: Config, spec: EnvSpec, teams: Teams, runtime: Runtime | None = None):
        self.cfg, self.spec, self.teams = cfg, spec, teams
        self.runtime = runtime  # replaces failed envs within env.max_restarts (else they raise)
        self.pool: VectorPool | None = None
        # the same reference episodes every generation, so that the curves compare
        self.seed = int(np.random.SeedSequence([cfg.seed, 7]).generate_state(1)[0])
        self.refs: dict[str, Policy] = {}
        self.first: list[Algorithm] | None = None  # the first generation's champions
        self.baseline: dict[str, float] = {}       # each reference's own return in each seat

    def measure(self, champs: list[Algorithm]) -> dict[str, float]:
        """Each team's champion (``champs[t]``) against the fixed opponents, beside each
        reference's own return in the champion's seat (the bar it has to clear)."""
        if self.first is None:
            self.first = [a.clone(0) for a in champs]
        if not self.cfg.games.reference_episodes:
            return {}
        if self.runtime is None:
            return self.play(champs)
        return self.runtime.scoring(lambda: self.play(champs), self.fresh)

    def play(self, champs: list[Algorithm]) -> dict[str, float]:
        assert self.first is not None
        if self.pool is None:
            self.pool = eval_pool(self.cfg, self.spec, self.cfg.games.reference_episodes)
            e = self.cfg.env
            self.refs = fixed_references(self.spec, e.name, e.kwargs, self.seed)
        out: dict[str, float] = {}
        opponents: dict[str, list[Policy]] = {k: [p] * len(self.teams)
                                              for k, p in self.refs.items()}
        opponents["first"] = list(self.first)
        for name, ref in opponents.items():
            for t, (team, _) in enumerate(self.teams):
                key = f"vs/{team}/{name}"
                out[key] = seat_return(champs[t], t, ref, self.teams, self.pool, self.seed)
                if key not in self.baseline:  # constant: computed once
                    self.baseline[key] = seat_return(ref[t], t, ref, self.teams, self.pool,
                                                     self.seed)
                out[key + "/ref"] = self.baseline[key]
        return out

    def state_dict(self) -> tuple[dict[str, Any], dict[str, Any]]:
        if self.first is None:
            return {}, {}
        return ({"league": {"baseline": self.baseline, "seeding": SEEDING}},
                {"league_first": [a.state_dict() for a in self.first]})

    def load_state_dict(self, meta: dict[str, Any], tensors: dict[str, Any],
                        device: torch.device) -> None:
        if "league_first" in tensors:
            self.first = [restore_algo(self.cfg, self.spec, st, device)
                          for st in tensors["league_first"]]
            league = meta.get("league", {})
            if league.get("seeding") == SEEDING:  # else measured on other episodes: anew
                self.baseline = dict(league.get("baseline", {}))

    def fresh(self) -> None:
        """Its envs failed: new ones are built when next needed."""
        with contextlib.suppress(Exception):
            self.close()
        self.pool = None

    def close(self) -> None:
        if self.pool is not None:
            self.pool.close()
