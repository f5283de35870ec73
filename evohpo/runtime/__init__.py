"""How a window runs: the runtime interface, and the choice between the local and Ray runtimes.

The trainer (:mod:`evohpo.loop.trainer`) decides *when* things happen: windows, evaluation,
selection, mutation, checkpoints. A runtime decides *how* they run: it holds the placed members'
envs and replay memory, collects a window of experience while the members learn, plays their
evaluation episodes, and saves and restores what it holds.
:class:`~evohpo.runtime.local.LocalRuntime` runs everything in this process;
:class:`~evohpo.runtime.ray.driver.RayRuntime` runs member groups in Ray actors. Both keep the
same per-env bookkeeping (episodes in progress, returns so far, the window's losses), so a
checkpoint of one resumes on the other.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import torch

from evohpo.config import Config
from evohpo.config.checks import keeps_next_actions, playing_teams
from evohpo.envs.heuristics import Scripted
from evohpo.envs.shaping import make_shaping
from evohpo.envs.spec import EnvSpec
from evohpo.errors import EnvError
from evohpo.evolve.member import Member
from evohpo.logs.loggers import Logger
from evohpo.runtime.evaluate import EndlessEpisode, Score
from evohpo.runtime.phases import PHASES, Phases

# who plays the other teams in the second half of a slot's envs (see Runtime.place)
Opponent = Scripted | None
T = TypeVar("T")


@dataclass
class WindowStats:
    """What a window's collection saw, beyond the members themselves."""

    loss_stats: list[dict[str, float]] = field(default_factory=list)  # per slot: sums and "n"
    train_returns: list[float] = field(default_factory=list)  # finished training episodes
    dropped: int = 0   # non-finite transitions kept out of the replay memory, in the whole run
    restarts: int = 0  # env pool restarts after failures, in the whole run


class Runtime(ABC):
    """Collects windows of experience for the placed members, and evaluates them."""

    device: torch.device  # where the members' networks live

    def __init__(self, cfg: Config, spec: EnvSpec, log: Logger, pool_seed: int,
                 fitness_agents: list[str], run_dir: Path | None = None):
        self.cfg, self.spec, self.log, self.run_dir = cfg, spec, log, run_dir
        self.pool_seed = pool_seed
        self.fitness_agents = fitness_agents
        self.k = cfg.env.num_envs // cfg.population.size  # envs per member slot
        self.teams = playing_teams(cfg, spec)  # None: each member drives every agent
        # the replay memory's optional field: the other teams' next actions as played
        self.next_actions = keeps_next_actions(cfg, self.teams)
        self.shaping = make_shaping(cfg, spec)  # None: the replay memory keeps the env's rewards
        self.size = cfg.population.size * len(self.teams or [None])  # members placed
        self.members: list[Member] = []
        self.slots: list[list[int]] | None = None
        self.opponents: list[tuple[int, Opponent]] | None = None
        self.obs: dict[str, np.ndarray] | None = None
        self.done = np.zeros(cfg.env.num_envs, bool)
        self.ep_return = np.zeros(cfg.env.num_envs)
        self.restarts = 0          # env failures survived, in the whole run (train/env_restarts)
        self.session_restarts = 0  # in this session: what env.max_restarts bounds
        self.dropped = 0
        # where each window's wall time goes (the loop's phases and this runtime's)
        self.phases = Phases(PHASES, [name for name, _ in self.teams or []])
        self.new_window()

    # ----------------------------------------------------------------------------- the interface
    @abstractmethod
    def start(self) -> None:
        """Before the first window: a new run resets its envs; a restored one has them back."""

    def place(self, members: list[Member], slots: list[list[int]] | None = None,
              opponents: list[tuple[int, Opponent]] | None = None) -> None:
        """Put the population's members into the slots, in order (slot j drives envs j*k ..).

        On a game of several teams, ``slots[j][t]`` is the member playing team ``t``'s agents
        in slot j (each member in one slot). ``opponents[j] = (u, other)``: in the second half
        of slot j's envs, every team but ``u`` is played by ``other`` without exploration: the
        scripted heuristic (``games.scripted_opponents``), or, where None, the slot's members as
        in the first half."""
        self.members, self.slots, self.opponents = list(members), slots, opponents

    @abstractmethod
    def collect(self, n: int, env_steps: int, generation: int,
                stop: Callable[[], bool] = lambda: False) -> int:
        """Up to ``n`` vector steps of acting, storing and learning; returns the steps taken.

        ``env_steps`` is the population's count before them (it drives the learning delay);
        ``stop`` is asked between steps (an interrupt), by runtimes that can stop inside a window.
        """

    @abstractmethod
    def evaluate(self, seed: int) -> list[Score]:
        """Every placed member's score on the episodes of ``seed`` (diverged members: the worst)."""

    @abstractmethod
    def play(self, matches: list[list[Member]], seed: int) -> list[dict[str, np.ndarray]]:
        """Matches between members on the episodes of ``seed``, noise-free: in match ``k``
        member ``matches[k][t]`` plays team ``t``'s agents. Returns each match's per-agent
        episode returns."""

    def finish_window(self) -> None:
        """At a window's end, before scoring: on-policy members learn on the rollouts they hold
        (none spans two windows); nothing for off-policy ones."""
        return None

    def window(self) -> WindowStats:
        return WindowStats(self.loss_stats, self.train_returns, self.dropped, self.restarts)

    def new_window(self) -> None:
        self.loss_stats: list[dict[str, float]] = [{} for _ in range(self.size)]
        self.train_returns: list[float] = []

    def summary(self) -> dict[str, Any]:
        return {}

    @abstractmethod
    def close(self) -> None: ...

    # ----------------------------------------------------------------------------- state
    def state_dict(self, with_buffer: bool) -> tuple[dict[str, Any], dict[str, Any]]:
        """(meta, tensors): the envs, the replay memory and the window's bookkeeping."""
        meta = {"loop": {"done": self.done.tolist(), "ep_return": self.ep_return.tolist(),
                         "train_returns": self.train_returns, "loss_stats": self.loss_stats},
                "has_buffer": with_buffer, "restarts": self.restarts, "dropped": self.dropped}
        tensors = {"obs": self.obs, "pool": self.pool_states(),
                   "buffer": self.buffer_state() if with_buffer else {}}
        return meta, tensors

    def load_state_dict(self, meta: dict[str, Any], tensors: dict[str, Any]) -> None:
        from evohpo.checkpoint import CheckpointError, numpify

        loop = meta["loop"]
        self.done = np.array(loop["done"], bool)
        self.ep_return = np.array(loop["ep_return"], np.float64)
        self.train_returns = list(loop["train_returns"])
        self.loss_stats = [dict(s) for s in loop["loss_stats"]]
        self.restarts, self.dropped = meta.get("restarts", 0), meta.get("dropped", 0)
        if meta["has_buffer"]:
            self.load_buffer(numpify(tensors["buffer"]))
        self.reset_envs(self.pool_seed)
        self.obs = self.set_pool_states(numpify(tensors["pool"]))
        for a, o in numpify(tensors["obs"]).items():  # the rebuilt envs must show what was saved
            if not np.array_equal(self.obs[a], o):
                raise CheckpointError(f"the envs could not be rebuilt exactly from the checkpoint "
                                      f"(agent {a!r} observes something else); was the env or its "
                                      "version changed?")

    @abstractmethod
    def reset_envs(self, seed: int | None) -> dict[str, np.ndarray]: ...

    @abstractmethod
    def pool_states(self) -> list[dict[str, Any]]: ...

    @abstractmethod
    def set_pool_states(self, states: list[dict[str, Any]]) -> dict[str, np.ndarray]: ...

    @abstractmethod
    def buffer_state(self) -> dict[str, Any]: ...

    @abstractmethod
    def load_buffer(self, state: dict[str, Any]) -> None: ...

    # ----------------------------------------------------------------------------- shared helpers
    def learning(self, m: Member) -> str:
        """The phase member ``m``'s learning is timed in: on a game of several teams, its
        team's part of ``learn``."""
        return "learn" if self.teams is None else f"learn/{m.team}"

    def learned(self, j: int, m: Member, metrics: dict[str, float]) -> None:
        """Placed member ``j`` took a gradient step (or learned from a rollout): its losses into
        the window's sums; a non-finite one marks it diverged."""
        bad = [k for k, v in metrics.items() if not np.isfinite(v)]
        if bad:
            self.mark_diverged(m, f"non-finite {', '.join(bad)}")
        stats = self.loss_stats[j]
        for key, v in metrics.items():
            name = key.split("/")[0]
            stats[name] = stats.get(name, 0.0) + v
        stats["n"] = stats.get("n", 0.0) + 1

    def env_failed(self, error: EnvError, then: str) -> None:
        """Envs failed (training or scoring): one failure against ``env.max_restarts``, which
        each session has whole (a resumed run starts afresh); past it, stop with a line that says
        what is on disk, else say what happens ``then``."""
        from evohpo.checkpoint import kept

        self.restarts += 1
        self.session_restarts += 1
        n, limit = self.session_restarts, self.cfg.env.max_restarts
        if n > limit:
            raise EnvError(f"{error} -- the env pool failed {n} times "
                           f"(env.max_restarts is {limit}); stopping. "
                           f"{kept(self.run_dir)}") from None
        self.log.message(f"{error}; {then} ({n}/{limit})")

    def scoring(self, play: Callable[[], T], fresh: Callable[[], None]) -> T:
        """``play()`` on scoring envs; where an env fails, ``fresh()`` replaces them and it plays
        again (the episodes follow from the seed, not from the envs), within the allowance the
        training pool has (:meth:`env_failed`). An episode that never ends is not a fault that
        fresh envs mend."""
        while True:
            try:
                return play()
            except EndlessEpisode:
                raise
            except EnvError as e:
                self.env_failed(e, "scoring again on fresh envs")
                fresh()

    def mark_diverged(self, m: Member, why: str) -> None:
        if not m.diverged:
            m.diverged, m.diverged_why = True, why
            self.log.message(f"member {m.id} diverged ({why}); it stops learning and is replaced "
                             "at the next selection")


__all__ = ["Runtime", "WindowStats"]
