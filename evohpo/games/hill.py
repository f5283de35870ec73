"""Which champions a run on a game of several teams hands over (``checkpoints/best.pt``).

``eval.champion: current`` hands over each team's member with the highest cross-play fitness in
the last generation. That fitness is measured against the other teams' members of the moment,
so a later champion is never compared with an earlier one on common ground: a team that drifts
into beating only the current opponents hands over its drifted member.

``eval.champion: hill`` keeps a champion per team. Each generation, the generation's champion
(its highest cross-play fitness) and the kept one each play the team's seat against the same
bench, on the same ``eval.champion_episodes`` episodes: the other teams played by their
generation champions, then by the scripted heuristic where the game has one. The newcomer
replaces the kept champion when its mean team return over the bench is at least the kept one's.
The champions play no part in training, so the rule changes what a run hands over and
nothing else.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from evohpo.algos import Algorithm, restore_algo
from evohpo.config import Config
from evohpo.envs import VectorPool
from evohpo.envs.spec import EnvSpec
from evohpo.games.references import heuristic_available, reference_policy
from evohpo.runtime.evaluate import Policy, Teams, eval_pool, seat_return


def bench_seed(seed: int) -> int:
    """The seed of the bench's episodes, the same every generation, from the run's seed."""
    return int(np.random.SeedSequence([seed, 11]).generate_state(1)[0])


def combined(algos: list[Algorithm], teams: Teams) -> Algorithm:
    """One algorithm whose team ``u`` agents are played as in ``algos[u]``."""
    out = algos[0].clone(0)
    for a, (_, agents) in zip(algos[1:], teams[1:], strict=True):
        out.take_agents(a, agents)
    return out


class Hill:
    """The kept champions of ``eval.champion: hill``."""

    def __init__(self, cfg: Config, spec: EnvSpec, teams: Teams):
        self.cfg, self.spec, self.teams = cfg, spec, teams
        self.seed = bench_seed(cfg.seed)
        self.pool: VectorPool | None = None
        e = cfg.env
        self.heuristic = (reference_policy("heuristic", spec, e.name, e.kwargs, self.seed)
                          if heuristic_available(e.name) else None)
        self.kept: list[Algorithm] = []          # per team: plays that team's seat
        self.records: list[dict[str, Any]] = []  # per team: what best.pt says of it
        self.scores: dict[str, float] = {}       # the last offer's bench scores

    def offer(self, candidate: Algorithm, records: dict[str, dict[str, Any]],
              generation: int) -> None:
        """The generation's champions (one algorithm, every team's agents played by that
        team's) against the kept ones; ``records``: what best.pt says of each. A team that
        takes it keeps ``candidate`` itself: nothing may change it afterwards."""
        fresh = [{**records[team], "generation": generation} for team, _ in self.teams]
        if not self.kept:
            self.kept = [candidate] * len(self.teams)
            self.records = fresh
            return
        if self.pool is None:
            self.pool = eval_pool(self.cfg, self.spec, self.cfg.eval.champion_episodes)
        T = len(self.teams)
        bench: list[Policy] = [candidate] + ([self.heuristic] if self.heuristic else [])
        for t, (team, _) in enumerate(self.teams):
            new, old = ([seat_return(p, t, [b] * T, self.teams, self.pool, self.seed)
                         for b in bench] for p in (candidate, self.kept[t]))
            self.scores[f"team/{team}/hill/new"] = float(np.mean(new))
            self.scores[f"team/{team}/hill/kept"] = float(np.mean(old))
            if np.mean(new) >= np.mean(old):  # every team against this generation's bench
                self.kept[t], self.records[t] = candidate, fresh[t]

    def record(self) -> dict[str, Any]:
        teams = {team: r for (team, _), r in zip(self.teams, self.records, strict=True)}
        return {"id": self.records[0]["id"], "teams": teams, "episodes": self.cfg.eval.episodes}

    def algo(self) -> Algorithm:
        return combined(self.kept, self.teams)

    def metrics(self) -> dict[str, Any]:
        """Each team's kept champion (member id, generation) and the bench scores."""
        out: dict[str, Any] = dict(self.scores)
        for (team, _), r in zip(self.teams, self.records, strict=True):
            out[f"team/{team}/kept"] = r["id"]
            out[f"team/{team}/kept_generation"] = r["generation"]
        return out

    def state_dict(self) -> tuple[dict[str, Any], dict[str, Any]]:
        if not self.kept:
            return {}, {}
        return ({"hill": {"records": self.records}},
                {"hill_kept": [a.state_dict() for a in self.kept]})

    def load_state_dict(self, meta: dict[str, Any], tensors: dict[str, Any], device: Any) -> None:
        if "hill_kept" in tensors:
            self.kept = [restore_algo(self.cfg, self.spec, st, device)
                         for st in tensors["hill_kept"]]
            self.records = list(meta["hill"]["records"])

    def close(self) -> None:
        if self.pool is not None:
            self.pool.close()
