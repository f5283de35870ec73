"""Playing episodes and scoring them: the one place where fitness is measured.

Who drives which agents is a *lineup*: a list of ``(policy, agents)`` pairs, each policy acting
(without exploration noise) for its own agents. Today every member drives all of an env's
agents; a lineup lets a member of one team play against members of another, or against a
reference policy, with the same code. Episodes are complete: every env of the pool plays one
episode from its own seed, and nothing after an env's first episode counts. An evaluation's
seed names its episodes: their env seeds are drawn from it (:func:`scoring_seeds`), so that two
seeds play unrelated episodes and the same seed plays the same ones.

Fitness is the mean episode return summed over the scored agents (``eval.fitness_agents``, by
default every agent). The trainer, ``evohpo eval``, playback and the Ray actors all score here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import cast

import numpy as np

from evohpo.config import Config
from evohpo.envs import VectorPool, make_pool
from evohpo.envs.spec import EnvSpec, Policy
from evohpo.envs.teams import Teams
from evohpo.errors import ConfigError, EnvError

MAX_EPISODE_STEPS = 100_000


Lineup = Sequence[tuple[Policy, Sequence[str]]]


class EndlessEpisode(EnvError):
    """An evaluation episode did not end: the env's settings, not a fault of its envs."""


# how an evaluation's episodes follow from its seed, recorded beside stored scores: scores
# recorded without it were played on env seeds ``seed, seed + 1, ...``, other episodes
SEEDING = "seed_sequence"


def scoring_seeds(seed: int, n: int) -> list[int]:
    """The env seeds of the ``n`` episodes that an evaluation of ``seed`` plays.

    Drawn from ``seed`` through a ``SeedSequence``, not ``seed + i``: neighbouring seeds play
    unrelated episodes (two sets of 100 share one with a chance of about 1 in 400,000; 32-bit
    seeds, which every env's ``reset`` takes), and the first ``k`` of ``n`` episodes are the
    ``k`` episodes of the same seed.
    """
    return [int(s) for s in np.random.SeedSequence(seed).generate_state(n)]


@dataclass(frozen=True)
class Score:
    """A member's fitness on a set of episodes, and each agent's mean return behind it."""

    fitness: float
    per_agent: dict[str, float]
    std_error: float = float("nan")  # standard error of the fitness (episode to episode spread)

    @staticmethod
    def of(returns: dict[str, np.ndarray], agents: Sequence[str]) -> Score:
        totals = episode_totals(returns, agents)
        se = float(totals.std(ddof=1) / np.sqrt(len(totals))) if len(totals) > 1 else float("nan")
        per_agent = {a: float(r.mean()) for a, r in returns.items()}
        return Score(float(sum(per_agent[a] for a in agents)), per_agent, se)

    @staticmethod
    def diverged(agents: Sequence[str]) -> Score:
        """The worst score: a diverged member is replaced at the next selection."""
        return Score(-np.inf, {a: float("nan") for a in agents})


def episode_totals(returns: dict[str, np.ndarray], agents: Sequence[str]) -> np.ndarray:
    """Each episode's return summed over ``agents``."""
    return np.sum([returns[a] for a in agents], axis=0)


def fitted(policy: Policy, obs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """``obs`` as a policy trained on fewer stacked observations (``env.frames``) reads them: the
    newest ones, which come first."""
    spec: EnvSpec | None = getattr(policy, "spec", None)
    if spec is None:
        return obs
    out = dict(obs)
    for a, o in obs.items():
        want = spec[a].obs_dim if a in spec.per_agent else o.shape[1]
        if o.shape[1] > want:
            out[a] = o[:, :want]
        elif o.shape[1] < want:
            raise ConfigError(f"agent {a!r}: a policy trained on {spec.frames} stacked "
                              f"observations ({want} values) cannot play where the env gives "
                              f"{o.shape[1]}; play it on its own run's env")
    return out


def lineup_actions(lineup: Lineup, obs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Each policy's noise-free actions for its own agents."""
    if len(lineup) == 1:  # one policy drives every agent: its actions as they are
        return lineup[0][0].act(obs, None)[0]
    actions: dict[str, np.ndarray] = {}
    for policy, agents in lineup:
        out, _ = policy.act(fitted(policy, obs), None)
        actions.update({a: out[a] for a in agents})
    return actions


def episode_returns(lineup: Lineup | Policy, pool: VectorPool, seed: int,
                    on_step: Callable[[], None] | None = None) -> dict[str, np.ndarray]:
    """Each env of ``pool`` plays one complete episode of ``seed`` (:func:`scoring_seeds`) with
    the lineup's deterministic policies.

    ``lineup`` may be a single policy, which then drives every agent. Returns every agent's
    episode return per env; ``on_step`` (if given) is called after every step (for rendering).
    """
    drivers = (cast(Lineup, lineup) if isinstance(lineup, (list, tuple))
               else [(cast(Policy, lineup), pool.spec.agents)])
    n = pool.num_envs
    obs = pool.reset(seed=scoring_seeds(seed, n))
    returns = {a: np.zeros(n) for a in pool.spec.agents}
    finished = np.zeros(n, bool)
    for _ in range(MAX_EPISODE_STEPS):
        res = pool.step(lineup_actions(drivers, obs))
        for a in pool.spec.agents:
            returns[a] += np.where(finished, 0.0, res.rewards[a])
        finished |= res.done
        obs = res.obs
        if on_step is not None:
            on_step()
        if finished.all():
            return returns
    raise EndlessEpisode(f"env {pool.spec.name!r}: an evaluation episode did not end in "
                         f"{MAX_EPISODE_STEPS:,} steps; evohpo needs episodes that end "
                         "(set max_cycles in env.kwargs)")


def team_returns(seats: Sequence[Policy], teams: Sequence[tuple[str, Sequence[str]]],
                 pool: VectorPool, seed: int) -> list[np.ndarray]:
    """Each team's return per episode of ``seed``, team ``u`` played by ``seats[u]``."""
    for p in seats:  # a random reference plays the same actions every time
        reset = getattr(p, "reset", None)
        if reset is not None:
            reset(seed)
    lineup: Lineup = [(p, agents) for p, (_, agents) in zip(seats, teams, strict=True)]
    returns = episode_returns(lineup, pool, seed)
    return [episode_totals(returns, agents) for _, agents in teams]


def seat_return(policy: Policy, t: int, others: list[Policy], teams: Teams, pool: VectorPool,
                seed: int) -> float:
    """Team ``t``'s mean return with ``policy`` in its seat and ``others[u]`` in seat ``u``, on
    the episodes of ``seed``."""
    seats = [policy if u == t else p for u, p in enumerate(others)]
    return float(team_returns(seats, teams, pool, seed)[t].mean())


def score(policy: Lineup | Policy, pool: VectorPool, seed: int, agents: Sequence[str]) -> Score:
    """Fitness of ``policy`` on one episode per env of ``pool``, from episode seeds of ``seed``."""
    return Score.of(episode_returns(policy, pool, seed), agents)


def eval_pool(cfg: Config, spec: EnvSpec, episodes: int) -> VectorPool:
    """Evaluation envs: one per episode, in process, on the backend the run trains on."""
    e = cfg.env
    return make_pool(e.name, e.kwargs, episodes, "sync", spec, backend=e.backend)


def play(cfg: Config, policy: Lineup | Policy, spec: EnvSpec, episodes: int,
         seed: int) -> dict[str, np.ndarray]:
    """Per-agent returns of ``episodes`` complete noise-free episodes, as the trainer measures
    them."""
    pool = eval_pool(cfg, spec, episodes)
    try:
        return episode_returns(policy, pool, seed)
    finally:
        pool.close()
