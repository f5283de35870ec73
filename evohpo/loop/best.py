"""The member a user gets: chosen on fresh episodes, and reported on other fresh episodes.

Each generation's highest fitness is the luckiest of several noisy estimates: taken at face
value it overstates its member, and keeping the highest over many generations overstates it
more. So each generation the screening winner (the member with the highest fitness) and the
member kept so far play the same ``eval.confirm_episodes`` fresh episodes; the better of the two
is kept. The kept member is then scored on another set of fresh episodes, which played no part
in choosing it: that score is what ``eval/best_ever`` and ``checkpoints/best.pt`` report, with
the seed and the number of its episodes; ``evohpo eval RUN`` plays those episodes by default and
reproduces it exactly.
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Any

import numpy as np
import torch

from evohpo.algos import Algorithm, restore_algo
from evohpo.config import Config
from evohpo.envs import VectorPool
from evohpo.envs.spec import EnvSpec
from evohpo.evolve.member import Member
from evohpo.runtime import Runtime
from evohpo.runtime.evaluate import SEEDING, Score, eval_pool, score


def fresh_seeds(eval_seed: int) -> tuple[int, int]:
    """Two seeds of episodes unrelated to the screening episodes of ``eval_seed``."""
    a, b = np.random.SeedSequence([eval_seed, 1]).generate_state(2)
    return int(a), int(b)


class BestKeeper:
    def __init__(self, cfg: Config, spec: EnvSpec, agents: list[str],
                 runtime: Runtime | None = None):
        self.cfg, self.spec, self.agents = cfg, spec, agents
        self.runtime = runtime  # replaces failed envs within env.max_restarts (else they raise)
        self.pool: VectorPool | None = None  # built when first needed
        self.algo: Algorithm | None = None   # a copy of the kept member's algorithm
        self.info: dict[str, Any] = {}       # its record: id, hyperparameters, ...
        self.score: Score | None = None      # on the reporting episodes
        self.seed = 0                        # of the reporting episodes
        self.seeding: str | None = SEEDING   # how their env seeds follow from it

    def play(self, algo: Algorithm, seed: int) -> Score:
        def run() -> Score:
            if self.pool is None:
                self.pool = eval_pool(self.cfg, self.spec, self.cfg.eval.confirm_episodes)
            return score(algo, self.pool, seed, self.agents)

        return run() if self.runtime is None else self.runtime.scoring(run, self.fresh)

    def fresh(self) -> None:
        """Its envs failed: new ones are built when next needed."""
        with contextlib.suppress(Exception):
            self.close()
        self.pool = None

    def offer(self, member: Member, screened: float, generation: int, env_steps: int,
              eval_seed: int) -> bool:
        """The screening winner against the kept member on the same fresh episodes; returns
        whether it is kept now. Either way, the kept member is scored anew."""
        choose, report = fresh_seeds(eval_seed)
        new = self.algo is None or (self.play(member.algo, choose).fitness
                                    > self.play(self.algo, choose).fitness)
        if new:
            self.algo = member.algo.clone(0)  # a copy: the member itself goes on learning
            self.info = {"id": member.id, "parent_id": member.parent_id,
                         "generation": generation, "env_steps": env_steps,
                         "screened_fitness": screened,
                         "hyperparams": dataclasses.asdict(member.hp), "arch": member.algo.arch()}
        assert self.algo is not None
        self.score, self.seed, self.seeding = self.play(self.algo, report), report, SEEDING
        return new

    def keep(self, m: Member, sc: Score, generation: int, env_steps: int, eval_seed: int,
             best_ever: float) -> tuple[float, dict[str, Any], Algorithm] | None:
        """After a generation: the kept member's (fitness, record, algorithm) to report and
        save, or None if nothing is to be written. ``m`` is the generation's screening winner;
        with ``eval.confirm_episodes: 0`` the highest screening fitness ever seen is kept."""
        if self.cfg.eval.confirm_episodes:
            if not m.diverged:
                self.offer(m, sc.fitness, generation, env_steps, eval_seed)
            if self.score is None or self.algo is None:
                return None
            return self.score.fitness, self.record(), self.algo
        if not sc.fitness > best_ever:
            return None
        return sc.fitness, {
            "id": m.id, "parent_id": m.parent_id, "fitness": sc.fitness,
            "per_agent": sc.per_agent, "eval_seed": eval_seed, "seeding": SEEDING,
            "episodes": self.cfg.eval.episodes, "hyperparams": dataclasses.asdict(m.hp),
            "arch": m.algo.arch()}, m.algo

    def record(self) -> dict[str, Any]:
        """What checkpoints/best.pt says of the kept member."""
        assert self.score is not None
        return {**self.info, "fitness": self.score.fitness, "per_agent": self.score.per_agent,
                "fitness_se": self.score.std_error, "eval_seed": self.seed,
                "seeding": self.seeding,
                "episodes": self.cfg.eval.confirm_episodes}

    # ----------------------------------------------------------------------------- checkpoints
    def state_dict(self) -> tuple[dict[str, Any], dict[str, Any]]:
        if self.algo is None or self.score is None:
            return {}, {}
        return {"best": self.record()}, {"best_algo": self.algo.state_dict()}

    def load_state_dict(self, meta: dict[str, Any], tensors: dict[str, Any],
                        device: torch.device) -> None:
        rec = meta.get("best")
        if not rec or "best_algo" not in tensors:
            return
        self.algo = restore_algo(self.cfg, self.spec, tensors["best_algo"], device)
        keys = ("id", "parent_id", "generation", "env_steps", "screened_fitness", "hyperparams",
                "arch")
        self.info = {k: rec[k] for k in keys if k in rec}
        self.score = Score(rec["fitness"], rec["per_agent"], rec["fitness_se"])
        self.seed = rec["eval_seed"]
        self.seeding = rec.get("seeding")  # none: scored by an older evohpo, on other episodes

    def close(self) -> None:
        if self.pool is not None:
            self.pool.close()
