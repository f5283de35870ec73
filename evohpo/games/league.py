"""Games of several teams: a population per team, scored by cross-play, and each team's champion
measured against fixed opponents.

On simple_tag, simple_adversary and the other competitive games, a member that drives every
agent and is scored on the sum of all returns is selected for one team losing (on simple_tag the
sum rewards a prey that gets caught). Here each team evolves its own members instead:

- **Training.** The pool's slots each hold one member of every team; slot ``i`` pairs team 0's
  member ``i`` with a rotation of the other teams' members
  (:func:`evohpo.games.schedule.training_pairs`) that moves on every window, so each member
  meets every opponent over ``n`` windows. Every transition goes into the one replay memory, and
  every member learns from all of it. A member learns its own team's actors and centralised
  critics; the critics' targets take the other team's next actions from the memory, where each
  step stores what the opponents played at the next observation (``games.opponent_actions:
  played``). With ``learned`` a member is a whole MADDPG/MATD3 learner that keeps its own model
  of the other team instead; either way only its own team's actors ever play. With
  ``games.scripted_opponents``, half of some slots' envs pit one team's member against the env's
  scripted heuristic.
- **Fitness.** Each window, members of different teams play matches (round robin, or
  ``games.opponents`` sampled opponents each) on the same ``eval.episodes`` episodes. A member's
  fitness comes only from its own team's returns: the mean over the matches it played
  (``games.fitness: return``) or an Elo rating updated from the match results (``elo``).
- **Selection and mutation** run per team, on that team's members only; their lineage records
  name the team.
- **Absolute progress.** Cross-play says who is better now, not whether the league improved. So
  each team's champion (its highest fitness) also plays fixed opponents every generation, on
  the same episodes each time: a random policy, the scripted heuristic where the game has one,
  and the first generation's champions. Each of those numbers sits beside the reference's own
  return in the champion's seat (``vs/<team>/<ref>/ref``): the champion beats a reference when
  it does better against the reference's team than the reference does.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from evohpo.algos import Algorithm, restore_algo
from evohpo.config import Config, EvolutionConfig, MutationConfig
from evohpo.envs import VectorPool
from evohpo.envs.spec import EnvSpec
from evohpo.evolve.evolution import next_generation
from evohpo.evolve.lineage import MutationRecord
from evohpo.evolve.member import Member
from evohpo.evolve.strategies import Offspring
from evohpo.games import schedule
from evohpo.games.references import fixed_references, heuristic_policy
from evohpo.runtime import Opponent, evaluate
from evohpo.runtime.evaluate import (
    Lineup,
    Policy,
    Score,
    Teams,
    episode_returns,
    episode_totals,
    eval_pool,
)
from evohpo.runtime.local import nonfinite_weights

REFERENCES = ("random", "heuristic", "first")
# a slot's opponent in the second half of its envs, as drawn
SCRIPTED = -1  # the env's scripted heuristic (games.scripted_opponents)
LIVE = -2      # the current members, as in the first half


def champions(members: list[Member], fitness: list[float], teams: Teams) -> list[int]:
    """Each team's best healthy member (its index in ``members``; ties: the lower index)."""
    out = []
    for team, _ in teams:
        idx = [i for i, m in enumerate(members) if m.team == team]
        healthy = [i for i in idx if not members[i].diverged] or idx
        out.append(max(healthy, key=lambda i: (np.nan_to_num(fitness[i], nan=-np.inf), -i)))
    return out


def combined(algos: list[Algorithm], teams: Teams) -> Algorithm:
    """One algorithm whose team ``u`` agents are played as in ``algos[u]``."""
    out = algos[0].clone(0)
    for a, (_, agents) in zip(algos[1:], teams[1:], strict=True):
        out.take_agents(a, agents)
    return out


class League:
    """Cross-play between the teams' populations; the trainer's counterpart of
    :meth:`evohpo.runtime.Runtime.evaluate` and of selection on games of several teams."""

    def __init__(self, cfg: Config, spec: EnvSpec, teams: Teams):
        self.cfg, self.spec, self.teams = cfg, spec, teams
        self.n = cfg.population.size
        self.pool: VectorPool = eval_pool(cfg, spec, cfg.eval.episodes)
        self.ref_pool: VectorPool | None = None
        # the same reference episodes every generation, so that the curves compare
        self.ref_seed = int(np.random.SeedSequence([cfg.seed, 7]).generate_state(1)[0])
        self.refs: dict[str, Policy] = {}
        self.first: list[Algorithm] | None = None  # the first generation's champions
        self.baseline: dict[str, float] = {}       # each reference's own return in each seat
        self.last: dict[str, Any] = {}             # the last evaluation's matches
        # games.scripted_opponents: the env's heuristic as a training opponent (checked to play
        # this env by evohpo.config.checks)
        p = cfg.games.scripted_opponents
        self.scripted = heuristic_policy(spec, cfg.env.name, cfg.env.kwargs) if p else None

    # ----------------------------------------------------------------------------- training
    def slots(self, generation: int) -> list[list[int]]:
        """Which members play in each pool slot this window: ``slots[i][t]`` is the index (in
        the population, team after team) of team ``t``'s member in slot ``i``."""
        pairs = schedule.training_pairs(self.n, len(self.teams), generation)
        return [[t * self.n + p[t] for t in range(len(self.teams))] for p in pairs]

    def draws(self, generation: int) -> list[tuple[int, int]]:
        """Who plays the other teams in the second half of each slot's envs in window
        ``generation``: for each slot, the team whose member plays all of the slot's envs (the
        teams in turn) and the opponent there: :data:`SCRIPTED` (the heuristic, with chance
        ``games.scripted_opponents``, drawn from the seed and the generation) or :data:`LIVE`
        (the current members). Empty: every env plays the current members."""
        p = self.cfg.games.scripted_opponents
        if not p:
            return []
        scripted = np.random.default_rng([self.cfg.seed, 19, generation]).random(self.n) < p
        if not scripted.any():
            return []
        T = len(self.teams)
        return [((j + generation) % T, SCRIPTED if s else LIVE) for j, s in enumerate(scripted)]

    def opponents(self, generation: int) -> list[tuple[int, Opponent]] | None:
        """Each slot's draw with its opponents (the scripted policy, or None for the current
        members); None: every env plays the current members."""
        return [(u, self.scripted if e == SCRIPTED else None)
                for u, e in self.draws(generation)] or None

    def drawn(self, generation: int) -> list[list[Any]]:
        """This window's draws as league.jsonl records them: [team, 'heuristic', or None for the
        current members]."""
        return [[u, "heuristic" if e == SCRIPTED else None] for u, e in self.draws(generation)]

    # ----------------------------------------------------------------------------- cross-play
    def evaluate(self, members: list[Member], seed: int) -> list[Score]:
        """Every member's score from the matches it played on the episodes of ``seed``."""
        for m in members:
            broken = nonfinite_weights(m.algo)
            if broken and not m.diverged:
                m.diverged, m.diverged_why = True, f"non-finite weights in {broken}"
        T = len(self.teams)
        matches = schedule.matchups(self.n, T, self.cfg.games.opponents,
                                  np.random.default_rng(seed))
        played: dict[int, list[dict[str, np.ndarray]]] = {i: [] for i in range(len(members))}
        team_returns = np.full((len(matches), T), np.nan)
        for k, match in enumerate(matches):
            idx = [t * self.n + match[t] for t in range(T)]
            if any(members[i].diverged for i in idx):
                continue
            lineup: Lineup = [(members[i].algo, agents)
                              for i, (_, agents) in zip(idx, self.teams, strict=True)]
            returns = episode_returns(lineup, self.pool, seed)
            for t, i in enumerate(idx):
                played[i].append(returns)
                team_returns[k, t] = episode_totals(returns, self.teams[t][1]).mean()
        scores = []
        for i, m in enumerate(members):
            agents = self.teams[self.team_index(m)][1]
            if m.diverged or not played[i]:
                scores.append(Score.diverged(self.spec.agents))
                continue
            both = {a: np.concatenate([r[a] for r in played[i]]) for a in self.spec.agents}
            scores.append(Score.of(both, agents))
        if self.cfg.games.fitness == "elo":
            scores = self.rate(members, matches, team_returns, scores)
        self.last = {"matches": [[members[t * self.n + mt[t]].id for t in range(T)]
                                 for mt in matches],
                     "team_returns": team_returns.tolist()}
        return scores

    def rate(self, members: list[Member], matches: list[tuple[int, ...]],
             team_returns: np.ndarray, scores: list[Score]) -> list[Score]:
        """Elo ratings from this window's match results; the rating becomes the fitness."""
        ok = ~np.isnan(team_returns).any(axis=1)
        T = len(self.teams)
        ratings = [np.array([members[t * self.n + i].rating for i in range(self.n)])
                   for t in range(T)]
        if ok.any():
            kept = [m for m, good in zip(matches, ok, strict=True) if good]
            ratings = schedule.elo_update(ratings, kept, schedule.outcomes(team_returns[ok]),
                                        self.cfg.games.elo_k)
        out = []
        for t in range(T):
            for i in range(self.n):
                j = t * self.n + i
                members[j].rating = float(ratings[t][i])
                sc = scores[j]
                out.append(sc if not np.isfinite(sc.fitness)
                           else Score(members[j].rating, sc.per_agent))
        return out

    def team_index(self, m: Member) -> int:
        return [name for name, _ in self.teams].index(str(m.team))

    # ----------------------------------------------------------------------------- selection
    def next_generation(self, members: list[Member], scores: list[Score], generation: int,
                        next_id: int, ev: EvolutionConfig, mut: MutationConfig,
                        rng: np.random.Generator) -> Offspring:
        """Selection and mutation within each team, team after team."""
        new: list[Member] = []
        records: list[MutationRecord] = []
        for t, (team, _) in enumerate(self.teams):
            block = slice(t * self.n, (t + 1) * self.n)
            out = next_generation(members[block], [s.fitness for s in scores[block]],
                                  [s.std_error for s in scores[block]], generation, next_id, ev,
                                  mut, rng)
            next_id = out.next_id
            new += out.members
            records += [dataclasses.replace(r, team=team) for r in out.records]
        return Offspring(new, records, next_id)

    # ----------------------------------------------------------------------------- references
    def references(self, members: list[Member], fitness: list[float]) -> dict[str, float]:
        """Each team's champion against the fixed opponents, beside each reference's own return
        in the champion's seat (the bar it has to clear)."""
        champs = [members[i].algo for i in champions(members, fitness, self.teams)]
        if self.first is None:
            self.first = [a.clone(0) for a in champs]
        if not self.cfg.games.reference_episodes:
            return {}
        if self.ref_pool is None:
            self.ref_pool = eval_pool(self.cfg, self.spec, self.cfg.games.reference_episodes)
            e = self.cfg.env
            self.refs = fixed_references(self.spec, e.name, e.kwargs, self.ref_seed)
        out: dict[str, float] = {}
        pool = self.ref_pool
        opponents: dict[str, list[Policy]] = {k: [p] * len(self.teams)
                                              for k, p in self.refs.items()}
        opponents["first"] = list(self.first)
        for name, ref in opponents.items():
            for t, (team, _) in enumerate(self.teams):
                key = f"vs/{team}/{name}"
                out[key] = evaluate.seat_return(champs[t], t, ref, self.teams, pool, self.ref_seed)
                if key not in self.baseline:  # constant: computed once
                    self.baseline[key] = evaluate.seat_return(ref[t], t, ref, self.teams, pool,
                                                          self.ref_seed)
                out[key + "/ref"] = self.baseline[key]
        return out

    # ----------------------------------------------------------------------------- records
    def window_metrics(self, members: list[Member], scores: list[Score], generation: int,
                       log: Any) -> dict[str, Any]:
        """Per team: best and mean fitness, the champion's id and its play against the
        references; per member: its rating. ``eval/*`` are set to the first team's. The window's
        matches go to league.jsonl."""
        fitness = [s.fitness for s in scores]
        m: dict[str, Any] = {}
        for (team, _), c in zip(self.teams, champions(members, fitness, self.teams), strict=True):
            own = [f for mem, f in zip(members, fitness, strict=True)
                   if mem.team == team and np.isfinite(f)]
            m[f"team/{team}/best_fitness"] = fitness[c]
            m[f"team/{team}/mean_fitness"] = float(np.mean(own)) if own else None
            m[f"team/{team}/champion"] = members[c].id
        first = self.teams[0][0]
        m.update({f"eval/{k}": m[f"team/{first}/{k}"] for k in ("best_fitness", "mean_fitness")})
        m["eval/best_member"] = m[f"team/{first}/champion"]
        if self.cfg.games.fitness == "elo":
            m.update({f"member/{mem.id}/rating": mem.rating for mem in members})
        m.update(self.references(members, fitness))
        # the draws' field keeps its first name, so that league.jsonl reads as before
        drawn = ({"past_opponents": self.drawn(generation)}
                 if self.cfg.games.scripted_opponents else {})
        log.league({"generation": generation, **self.last, **drawn})
        return m

    def summary(self, m: dict[str, Any]) -> dict[str, dict[str, Any]]:
        """Each team's champion and its fitness, from a generation's metrics."""
        return {team: {"champion": m[f"team/{team}/champion"],
                       "fitness": m[f"team/{team}/best_fitness"]} for team, _ in self.teams}

    def record(self, members: list[Member], scores: list[Score]) -> dict[str, Any]:
        """What checkpoints/best.pt says of the champions."""
        champs = champions(members, [s.fitness for s in scores], self.teams)
        teams = {team: {"id": members[c].id, "parent_id": members[c].parent_id,
                        "fitness": scores[c].fitness, "fitness_se": scores[c].std_error,
                        "per_agent": scores[c].per_agent,
                        "hyperparams": dataclasses.asdict(members[c].hp),
                        "arch": members[c].algo.arch()}
                 for (team, _), c in zip(self.teams, champs, strict=True)}
        return {"id": members[champs[0]].id, "teams": teams, "episodes": self.cfg.eval.episodes}

    def champion_algo(self, members: list[Member], fitness: list[float]) -> Algorithm:
        """One algorithm whose every team's agents are played by that team's champion."""
        return combined([members[i].algo for i in champions(members, fitness, self.teams)],
                        self.teams)

    def keep(self, members: list[Member], scores: list[Score],
             generation: int) -> tuple[dict[str, Any], Algorithm]:
        """What checkpoints/best.pt holds: the record and the algorithm of every team's
        champion."""
        return self.record(members, scores), self.champion_algo(members,
                                                                [s.fitness for s in scores])

    def state_dict(self) -> tuple[dict[str, Any], dict[str, Any]]:
        if self.first is None:
            return {}, {}
        return ({"league": {"baseline": self.baseline}},
                {"league_first": [a.state_dict() for a in self.first]})

    def load_state_dict(self, meta: dict[str, Any], tensors: dict[str, Any], device: Any) -> None:
        if "league_first" in tensors:
            self.first = [restore_algo(self.cfg, self.spec, st, device)
                          for st in tensors["league_first"]]
            self.baseline = dict(meta.get("league", {}).get("baseline", {}))

    def close(self) -> None:
        for owner in (self.pool, self.ref_pool):
            if owner is not None:
                owner.close()
