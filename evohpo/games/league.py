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
- **Absolute progress**: each team's champion against fixed opponents
  (:mod:`evohpo.games.references`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import torch

from evohpo.algos import Algorithm
from evohpo.config import Config, EvolutionConfig, MutationConfig
from evohpo.envs.heuristics import heuristic_policy
from evohpo.envs.spec import EnvSpec
from evohpo.evolve.evolution import next_generation
from evohpo.evolve.lineage import MutationRecord
from evohpo.evolve.member import Member
from evohpo.evolve.population import make_population
from evohpo.evolve.strategies import Offspring
from evohpo.games import schedule
from evohpo.games.references import References
from evohpo.logs.loggers import Logger
from evohpo.runtime import Opponent, Runtime
from evohpo.runtime.evaluate import SEEDING, Score, Teams, episode_totals
from evohpo.runtime.local import nonfinite_weights

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
    """A population per team, scored by cross-play and selected team by team: what the loop
    evolves on a game of several teams (see :class:`evohpo.loop.populations.Populations`)."""

    def __init__(self, cfg: Config, spec: EnvSpec, teams: Teams, runtime: Runtime):
        self.cfg, self.spec, self.teams, self.runtime = cfg, spec, teams, runtime
        self.n = cfg.population.size
        self.references = References(cfg, spec, teams, runtime)
        self.last: dict[str, Any] = {}             # the last evaluation's matches
        # games.scripted_opponents: the env's heuristic as a training opponent (checked to play
        # this env by evohpo.config.checks)
        p = cfg.games.scripted_opponents
        self.scripted = heuristic_policy(spec, cfg.env.name, cfg.env.kwargs) if p else None

    # ----------------------------------------------------------------------------- training
    def first_generation(self, cfg: Config, rng: np.random.Generator,
                         device: torch.device) -> tuple[list[Member], list[MutationRecord]]:
        """``population.size`` members per team, team after team."""
        return make_population(cfg, self.spec, rng, device, [name for name, _ in self.teams])

    def describe(self) -> str:
        names = ", ".join(name for name, _ in self.teams)
        return f"a population per team ({names}): {self.n} members each"

    def place(self, members: list[Member], generation: int) -> None:
        """This window's pairing of members into slots, and its draws of opponents."""
        self.runtime.place(members, self.slots(generation), self.opponents(generation))

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
        seats = [[t * self.n + match[t] for t in range(T)] for match in matches]
        live = [k for k, idx in enumerate(seats) if not any(members[i].diverged for i in idx)]
        # played by the runtime: on Ray, the matches run in the actors at once
        results = self.runtime.play([[members[i] for i in seats[k]] for k in live], seed)
        for k, returns in zip(live, results, strict=True):
            for t, i in enumerate(seats[k]):
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

    # ----------------------------------------------------------------------------- records
    def window_metrics(self, members: list[Member], scores: list[Score], generation: int,
                       log: Logger) -> dict[str, Any]:
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
        with self.runtime.phases("score"):  # the champions against the references
            m.update(self.references.measure(
                [members[i].algo for i in champions(members, fitness, self.teams)]))
        # the draws' field keeps its first name, so that league.jsonl reads as before
        drawn = ({"past_opponents": self.drawn(generation)}
                 if self.cfg.games.scripted_opponents else {})
        log.league({"generation": generation, **self.last, **drawn})
        return m

    def champions(self, m: dict[str, Any]) -> dict[str, dict[str, Any]]:
        """Each team's champion and its fitness, from a generation's metrics."""
        return {team: {"champion": m[f"team/{team}/champion"],
                       "fitness": m[f"team/{team}/best_fitness"]} for team, _ in self.teams}

    def confirmed(self) -> Score | None:
        return None  # cross-play fitness: no member is confirmed on fresh episodes

    def progress(self, scores: list[Score], metrics: dict[str, Any]) -> dict[str, str]:
        return {team: f"{c['fitness']:.2f}" for team, c in self.champions(metrics).items()}

    def summary(self, metrics: dict[str, Any]) -> dict[str, Any]:
        return {"teams": self.champions(metrics)}

    def record(self, members: list[Member], scores: list[Score], seed: int) -> dict[str, Any]:
        """What checkpoints/best.pt says of the champions: with the seed and the number of the
        episodes their matches were played on, which ``evohpo eval`` plays by default."""
        champs = champions(members, [s.fitness for s in scores], self.teams)
        teams = {team: {"id": members[c].id, "parent_id": members[c].parent_id,
                        "fitness": scores[c].fitness, "fitness_se": scores[c].std_error,
                        "per_agent": scores[c].per_agent,
                        "hyperparams": dataclasses.asdict(members[c].hp),
                        "arch": members[c].algo.arch()}
                 for (team, _), c in zip(self.teams, champs, strict=True)}
        return {"id": members[champs[0]].id, "teams": teams, "episodes": self.cfg.eval.episodes,
                "eval_seed": seed, "seeding": SEEDING}

    def champion_algo(self, members: list[Member], fitness: list[float]) -> Algorithm:
        """One algorithm whose every team's agents are played by that team's champion."""
        return combined([members[i].algo for i in champions(members, fitness, self.teams)],
                        self.teams)

    def keep(self, members: list[Member], scores: list[Score], generation: int, env_steps: int,
             seed: int, best_ever: float) -> tuple[float, dict[str, Any], Algorithm]:
        """What checkpoints/best.pt holds: the record and the algorithm of every team's
        champion (``best_ever`` stays as it is: cross-play fitness compares within a
        generation only)."""
        return (best_ever, self.record(members, scores, seed),
                self.champion_algo(members, [s.fitness for s in scores]))

    def state_dict(self) -> tuple[dict[str, Any], dict[str, Any]]:
        return self.references.state_dict()

    def load_state_dict(self, meta: dict[str, Any], tensors: dict[str, Any],
                        device: torch.device) -> None:
        self.references.load_state_dict(meta, tensors, device)

    def close(self) -> None:
        self.references.close()
