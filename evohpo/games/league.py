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
  step stores what the opponents played at the next observation (``population.opponent_actions:
  played``). With ``learned`` a member is a whole MADDPG/MATD3 learner that keeps its own model
  of the other team instead (``mixed``: but takes the scripted heuristic's as played); either
  way only its own team's actors ever play.
- **Fitness.** Each window, members of different teams play matches (round robin, or
  ``eval.opponents`` sampled opponents each) on the same ``eval.episodes`` episodes. A member's
  fitness comes only from its own team's returns: the mean over the matches it played
  (``eval.team_fitness: return``) or an Elo rating updated from the match results (``elo``).
- **Selection and mutation** run per team, on that team's members only; their lineage records
  name the team.
- **Absolute progress.** Cross-play says who is better now, not whether the league improved. So
  each team's champion (its highest fitness; with ``eval.champion: hill`` the kept one of
  :mod:`evohpo.games.hill`) also plays fixed opponents every generation, on the same episodes each
  time: a random policy, the scripted heuristic where the game has one, and the first
  generation's champions. Each of those numbers sits beside the reference's own return in the
  champion's seat (``vs/<team>/<ref>/ref``): the champion beats a reference when it does
  better against the reference's team than the reference does.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from evohpo.algos import Algorithm, restore_algo
from evohpo.config import Config, EvolutionConfig, MutationConfig
from evohpo.envs import VectorPool
from evohpo.envs.spec import EnvSpec
from evohpo.errors import ConfigError
from evohpo.evolve.evolution import next_generation
from evohpo.evolve.lineage import MutationRecord
from evohpo.evolve.member import Member
from evohpo.evolve.strategies import Offspring
from evohpo.games import schedule
from evohpo.games.hill import Hill, combined
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
# a slot's opponent in the second half of its envs, as drawn (otherwise: a kept champion's index)
SCRIPTED = -1  # the env's scripted heuristic (population.scripted_opponents)
LIVE = -2      # the current members, as in the first half


def champions(members: list[Member], fitness: list[float], teams: Teams) -> list[int]:
    """Each team's best healthy member (its index in ``members``; ties: the lower index)."""
    out = []
    for team, _ in teams:
        idx = [i for i, m in enumerate(members) if m.team == team]
        healthy = [i for i in idx if not members[i].diverged] or idx
        out.append(max(healthy, key=lambda i: (np.nan_to_num(fitness[i], nan=-np.inf), -i)))
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
        self.hill = Hill(cfg, spec, teams) if cfg.eval.champion == "hill" else None
        # population.past_opponents: champions of earlier generations (one algorithm each,
        # every team's agents played by that generation's champion) and their generations
        self.archive: list[Algorithm] = []
        self.archive_gens: list[int] = []
        # population.scripted_opponents: the env's heuristic as a training opponent
        p = cfg.population.scripted_opponents
        self.scripted = (heuristic_policy(
            spec, cfg.env.name, cfg.env.kwargs,
            f"the scripted heuristic of config key 'population.scripted_opponents' ({p})",
            "set it to 0") if p else None)
        names = [t for t, _ in teams]
        # population.scripted_teams: the indices of the teams whose members play it, in turn,
        # until population.scripted_teams_until; the env steps where this window started
        self.scripted_teams = evaluate.facing_heuristic(cfg, names)
        self.past_teams = evaluate.facing_past(cfg, names)  # population.past_teams
        self.started = 0
        # eval.heuristic_weight: part of the fitness from a match against the heuristic
        w = cfg.eval.heuristic_weight
        if w and cfg.eval.team_fitness != "return":
            raise ConfigError(f"config key 'eval.heuristic_weight': {w} weighs team returns; "
                              f"eval.team_fitness is {cfg.eval.team_fitness!r}: set it to "
                              "return, or the weight to 0")
        self.anchor = (self.scripted or heuristic_policy(
            spec, cfg.env.name, cfg.env.kwargs,
            f"the scripted heuristic of config key 'eval.heuristic_weight' ({w})",
            "set it to 0")) if w else None

    # ----------------------------------------------------------------------------- training
    def slots(self, generation: int) -> list[list[int]]:
        """Which members play in each pool slot this window: ``slots[i][t]`` is the index (in
        the population, team after team) of team ``t``'s member in slot ``i``."""
        pairs = schedule.training_pairs(self.n, len(self.teams), generation)
        return [[t * self.n + p[t] for t in range(len(self.teams))] for p in pairs]

    def draws(self, generation: int, env_steps: int = 0) -> list[tuple[int, int]]:
        """Who plays the other teams in the second half of each slot's envs in window
        ``generation`` (starting at ``env_steps``): for each slot, the team whose member plays
        all of the slot's envs and the opponent there: the index of kept champions
        (``population.past_opponents``, drawn uniformly, against the teams of
        ``population.past_teams``), :data:`SCRIPTED` (the heuristic, with
        chance ``population.scripted_opponents``, against the teams of
        ``population.scripted_teams`` before ``scripted_teams_until``) or :data:`LIVE` (the
        current members), all drawn from the seed and the generation. Empty: every env plays
        the current members."""
        p = self.cfg.population.scripted_opponents
        if not self.archive and not p:
            return []
        rng = np.random.default_rng([self.cfg.seed, 17, generation])
        picks = [int(rng.integers(len(self.archive))) if self.archive else LIVE
                 for _ in range(self.n)]
        if p:  # a stream of its own: the past champions' draws stay what they were without it
            scripted = np.random.default_rng([self.cfg.seed, 19, generation]).random(self.n) < p
            picks = [SCRIPTED if s else e for s, e in zip(scripted, picks, strict=True)]
        if all(e == LIVE for e in picks):
            return []
        every = range(len(self.teams))
        until = self.cfg.population.scripted_teams_until
        facing = self.scripted_teams if until is None or env_steps < until else every
        drawn = []
        for j, e in enumerate(picks):  # the teams in turn; the heuristic meets `facing` only,
            # past champions the teams of population.past_teams
            turns = facing if e == SCRIPTED else every if e == LIVE else self.past_teams
            drawn.append((turns[(j + generation) % len(turns)], e))
        return drawn

    def opponents(self, generation: int, env_steps: int = 0) -> list[tuple[int, Opponent]] | None:
        """Each slot's draw with its opponents (past champions, the scripted policy, or None
        for the current members) in the window that starts at ``env_steps``; None: every env
        plays the current members."""
        self.started = env_steps
        return [(u, self.opponent(e)) for u, e in self.draws(generation, env_steps)] or None

    def opponent(self, e: int) -> Opponent:
        if e == LIVE:
            return None
        if e == SCRIPTED:
            assert self.scripted is not None
            return self.scripted
        return self.archive[e]

    def drawn(self, generation: int) -> list[list[Any]]:
        """This window's draws as league.jsonl records them: [team, generation kept, or
        'heuristic', or None for the current members]."""
        names = {SCRIPTED: "heuristic", LIVE: None}
        return [[u, names[e] if e in names else self.archive_gens[e]]
                for u, e in self.draws(generation, self.started)]

    def remember(self, members: list[Member], fitness: list[float], generation: int) -> None:
        """Keep this generation's champions as a past opponent; when ``past_opponents`` are
        kept already, a random earlier one (drawn from the seed and the generation) leaves."""
        cap = self.cfg.population.past_opponents
        if not cap:
            return
        if self.archive_gens and self.archive_gens[-1] == generation:  # evaluated again
            self.archive.pop()
            self.archive_gens.pop()
        if len(self.archive) >= cap:
            drop = int(np.random.default_rng([self.cfg.seed, 13, generation]).integers(cap))
            del self.archive[drop], self.archive_gens[drop]
        self.archive.append(self.champion_algo(members, fitness))
        self.archive_gens.append(generation)

    # ----------------------------------------------------------------------------- cross-play
    def evaluate(self, members: list[Member], seed: int) -> list[Score]:
        """Every member's score from the matches it played on the episodes of ``seed``."""
        for m in members:
            broken = nonfinite_weights(m.algo)
            if broken and not m.diverged:
                m.diverged, m.diverged_why = True, f"non-finite weights in {broken}"
        T = len(self.teams)
        matches = schedule.matchups(self.n, T, self.cfg.eval.opponents,
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
            sc = Score.of(both, agents)
            scores.append(sc if self.anchor is None else self.anchored(m, sc, seed))
        if self.cfg.eval.team_fitness == "elo":
            scores = self.rate(members, matches, team_returns, scores)
        self.last = {"matches": [[members[t * self.n + mt[t]].id for t in range(T)]
                                 for mt in matches],
                     "team_returns": team_returns.tolist()}
        return scores

    def anchored(self, m: Member, cross: Score, seed: int) -> Score:
        """``cross`` (the member's cross-play score) mixed with its team's return against the
        scripted heuristic on the same episodes: ``eval.heuristic_weight`` of the fitness
        from that match."""
        assert self.anchor is not None
        w, t = self.cfg.eval.heuristic_weight, self.team_index(m)
        lineup: Lineup = [(m.algo if u == t else self.anchor, agents)
                          for u, (_, agents) in enumerate(self.teams)]
        vs = episode_totals(episode_returns(lineup, self.pool, seed), self.teams[t][1])
        se = float(vs.std(ddof=1) / np.sqrt(len(vs))) if len(vs) > 1 else float("nan")
        return Score((1 - w) * cross.fitness + w * float(vs.mean()), cross.per_agent,
                     float(np.hypot((1 - w) * cross.std_error, w * se)))

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
                                        self.cfg.eval.elo_k)
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
        champs = (self.hill.kept if self.hill else
                  [members[i].algo for i in champions(members, fitness, self.teams)])
        if self.first is None:
            self.first = [a.clone(0) for a in champs]
        if not self.cfg.eval.reference_episodes:
            return {}
        if self.ref_pool is None:
            self.ref_pool = eval_pool(self.cfg, self.spec, self.cfg.eval.reference_episodes)
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
        if self.cfg.eval.team_fitness == "elo":
            m.update({f"member/{mem.id}/rating": mem.rating for mem in members})
        m.update(self.hill.metrics() if self.hill else {})
        m.update(self.references(members, fitness))
        pop = self.cfg.population
        past = ({"past_opponents": self.drawn(generation)}
                if pop.past_opponents or pop.scripted_opponents else {})  # before remember()
        log.league({"generation": generation, **self.last, **past})
        self.remember(members, fitness, generation)
        return m

    def summary(self, m: dict[str, Any]) -> dict[str, dict[str, Any]]:
        """Each team's champion and its fitness, from a generation's metrics (hill: and the kept
        champion, with the generation it is from)."""
        return {team: {"champion": m[f"team/{team}/champion"],
                       "fitness": m[f"team/{team}/best_fitness"],
                       **({"kept": m[f"team/{team}/kept"],
                           "kept_generation": m[f"team/{team}/kept_generation"]}
                          if self.hill else {})} for team, _ in self.teams}

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
        champion, this generation's or, with ``eval.champion: hill``, the kept one."""
        record = self.record(members, scores)
        algo = self.champion_algo(members, [s.fitness for s in scores])
        if self.hill is None:
            return record, algo
        self.hill.offer(algo, record["teams"], generation)
        return self.hill.record(), self.hill.algo()

    def state_dict(self) -> tuple[dict[str, Any], dict[str, Any]]:
        if self.first is None:
            return {}, {}
        hmeta, htensors = self.hill.state_dict() if self.hill else ({}, {})
        return {"league": {"baseline": self.baseline, "archive_gens": self.archive_gens},
                **hmeta}, {"league_first": [a.state_dict() for a in self.first],
                           "league_archive": [a.state_dict() for a in self.archive], **htensors}

    def load_state_dict(self, meta: dict[str, Any], tensors: dict[str, Any], device: Any) -> None:
        if "league_first" in tensors:
            self.first = [restore_algo(self.cfg, self.spec, st, device)
                          for st in tensors["league_first"]]
            saved = meta.get("league", {})
            self.baseline = dict(saved.get("baseline", {}))
            self.archive_gens = list(saved.get("archive_gens", []))
            self.archive = [restore_algo(self.cfg, self.spec, st, device)
                            for st in tensors.get("league_archive", [])]
        if self.hill:
            self.hill.load_state_dict(meta, tensors, device)

    def close(self) -> None:
        for owner in (self.pool, self.ref_pool, self.hill):
            if owner is not None:
                owner.close()
