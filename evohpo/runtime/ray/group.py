"""A Ray actor holding a group of member slots: its envs, its replay copy, its members' learning.

The actor runs a :class:`~evohpo.runtime.local.LocalRuntime` for one group, built from
:func:`group_config` (the group's members and envs, no run directory, no loggers), which
collects and learns exactly as a local run does. The driver tells it which members its slots
hold, how many vector steps to run, and with which seeds to evaluate.

Everything that crosses to the driver is plain data on the CPU (state dicts, numpy arrays), so
a driver without a GPU can take a state dict from an actor with one.
"""

from __future__ import annotations

import math
import os
import platform
from typing import Any

import numpy as np
import torch

from evohpo import config as C
from evohpo.algos import restore_algo
from evohpo.algos.buffer import ReplayBuffer
from evohpo.checkpoint import map_tree
from evohpo.config.checks import fitness_agents
from evohpo.envs import spec_for
from evohpo.envs.heuristics import Scripted, heuristic_policy
from evohpo.evolve.member import Member, member_from, member_meta
from evohpo.logs.loggers import Logger
from evohpo.runtime import Opponent
from evohpo.runtime.evaluate import Score
from evohpo.runtime.local import LocalRuntime

Rows = dict[str, np.ndarray]  # one array per ReplayBuffer field, a row per transition


def group_config(cfg: C.Config, num_actors: int, gpus: float = 0.0) -> C.Config:
    """The config of one group's trainer: its share of the members and envs (on ``gpus`` GPUs).

    Every group steps in lockstep with the others, so the population's env steps are the
    group's times ``num_actors``; the learning delay is scaled the same way.
    """
    d = cfg.distributed
    size = cfg.population.size // num_actors
    return C.load([C.to_dict(cfg), {
        "population": {"size": size},
        # async env workers (pettingzoo backend): the actor's CPUs, not the whole node's
        "env": {"num_envs": cfg.env.num_envs // num_actors,
                "workers": cfg.env.workers or max(1, math.floor(d.cpus_per_actor))},
        "evolution": {"learning_delay": -(-cfg.evolution.learning_delay // num_actors),
                      "tournament_size": min(cfg.evolution.tournament_size, size)},
        # Ray hides unasked GPUs; auto takes the share of one it was given (resolve_resources)
        "device": ("cuda" if gpus else "cpu") if cfg.device == "auto" else cfg.device,
        "checkpoint": {"enabled": False},
        "logging": {"console": False, "jsonl": False, "wandb": {"mode": "disabled"}},
        "distributed": {"backend": "local", "num_actors": 0},
    }])


def to_cpu(obj: Any) -> Any:
    return map_tree(obj, lambda x: x.detach().cpu() if isinstance(x, torch.Tensor) else x)


def opponent_state(opponent: Opponent) -> Any:
    """What an actor needs to rebuild a slot's opponent: ``"heuristic"`` for the scripted
    policy (each actor builds its own), or None."""
    return None if opponent is None else "heuristic"


def restore_opponent(st: Any, scripted: Scripted | None) -> Opponent:
    """The opponent :func:`opponent_state` describes (``scripted``: the actor's heuristic)."""
    if st is None:
        return None
    assert scripted is not None
    return scripted


def member_state(m: Member) -> dict[str, Any]:
    """What an actor and the driver exchange about a member: its record and its algorithm's
    state."""
    return {**member_meta(m), "algo": to_cpu(m.algo.state_dict())}


def new_rows(buf: ReplayBuffer, since: int) -> Rows:
    """The rows stored since ``buf.added`` was ``since`` (at most the newest ``capacity`` of
    them)."""
    m = min(buf.added - since, buf.size)
    idx = (buf.pos - m + np.arange(m)) % buf.capacity
    return {k: getattr(buf, k)[idx] for k in buf.fields}


def add_rows(buf: ReplayBuffer, rows: Rows) -> int:
    """Append rows from :func:`new_rows` of another copy (already checked finite there)."""
    m = len(rows["rewards"])
    keep = min(m, buf.capacity)
    idx = (buf.pos + np.arange(keep)) % buf.capacity
    for k in buf.fields:
        getattr(buf, k)[idx] = rows[k][m - keep:]
    buf.pos = int((buf.pos + keep) % buf.capacity)
    buf.size = min(buf.size + keep, buf.capacity)
    buf.added += keep
    return keep


class MemberGroup:
    """One actor's slots. Wrapped with ``ray.remote`` by the driver; usable without Ray in tests."""

    def __init__(self, cfg: dict[str, Any], index: int):
        self.index = index
        c = C.load([cfg])
        torch.set_num_threads(c.torch_threads or 1)
        spec = spec_for(c.env)
        # the pool seed is the driver's to give (reset); the runtime's own is never used
        self.t = LocalRuntime(c, spec, Logger(), 0, fitness_agents(c.eval.fitness_agents, spec))
        self.members: list[Member] = []
        self.scripted: Scripted | None = None  # games.scripted_opponents, built once

    def info(self) -> dict[str, Any]:
        return {"index": self.index, "pid": os.getpid(), "host": platform.node(),
                "device": str(self.t.device), "torch_threads": torch.get_num_threads()}

    # ------------------------------------------------------------------ members
    def set_members(self, states: dict[int, dict[str, Any]]) -> None:
        """Put members into slots ({slot: member_state}); the others keep theirs."""
        t = self.t
        members: list[Any] = list(t.members) or [None] * t.size  # every slot filled below
        for slot, st in states.items():
            algo = restore_algo(t.cfg, t.spec, st["algo"], t.device)
            members[slot] = member_from(st, algo)
        n = t.cfg.population.size  # teams: the driver sends each slot's members, team by team
        t.place(members, [[k * n + i for k in range(len(t.teams))] for i in range(n)]
                if t.teams else None, t.opponents)

    def set_opponents(self, opponents: list[tuple[int, Any]] | None) -> None:
        """Each slot's team that plays all of its envs and who plays the others in the second
        half, as :func:`opponent_state` sent it; None: the current members everywhere."""
        t = self.t
        if self.scripted is None and t.cfg.games.scripted_opponents:
            self.scripted = heuristic_policy(t.spec, t.cfg.env.name, t.cfg.env.kwargs)
        t.opponents = None if opponents is None else [
            (u, restore_opponent(st, self.scripted)) for u, st in opponents]

    # ------------------------------------------------------------------ envs and loop state
    def reset(self, seed: int | None) -> dict[str, np.ndarray]:
        """Reset the group's envs; env i gets seed ``seed + i`` (the driver offsets each group)."""
        if seed is not None:
            self.t.pool_seed = seed  # restarted pools derive their seeds from it
        return self.t.reset_envs(seed)

    def pool_state(self) -> list[dict[str, Any]]:
        return self.t.pool_states()

    def set_pool_state(self, states: list[dict[str, Any]]) -> dict[str, np.ndarray]:
        return self.t.set_pool_states(states)

    def set_loop(self, done: np.ndarray, ep_return: np.ndarray) -> None:
        self.t.done, self.t.ep_return = np.array(done, bool), np.array(ep_return, np.float64)

    # ------------------------------------------------------------------ a window
    def run(self, n: int, env_steps: int, restarts: int,
            session_restarts: int) -> tuple[dict[str, Any], Rows]:
        """``n`` vector steps of collection and learning; (report for the driver, the new rows).

        ``env_steps`` is the group's share of the population's steps (drives the learning
        delay); ``restarts`` the run's env pool restarts so far, ``session_restarts`` this
        session's (``env.max_restarts`` bounds them, for the whole population).
        """
        t = self.t
        t.restarts, t.session_restarts = restarts, session_restarts
        since = t.buffer.added if t.buffer is not None else 0
        t.collect(n, env_steps, 0)
        report = {"members": [member_state(m) for m in t.members], "loss_stats": t.loss_stats,
                  "train_returns": t.train_returns, "dropped": t.dropped, "restarts": t.restarts,
                  "obs": t.obs, "done": t.done, "ep_return": t.ep_return}
        t.dropped = 0
        t.new_window()
        return report, {} if t.buffer is None else new_rows(t.buffer, since)

    def finish(self) -> dict[str, Any]:
        """The window's end: on-policy members learn on the rollouts they hold; their states
        and losses for the driver."""
        t = self.t
        t.finish_window()
        report = {"members": [member_state(m) for m in t.members], "loss_stats": t.loss_stats}
        t.new_window()
        return report

    def receive(self, *blocks: Rows) -> int:
        """Append the other groups' rows of this window to this group's replay copy."""
        buf = self.t.buffer
        return 0 if buf is None else sum(add_rows(buf, rows) for rows in blocks)

    def evaluate(self, seed: int) -> list[tuple[Score, bool, str]]:
        """Each member's (score, diverged, why) on episodes of ``seed``."""
        results = self.t.evaluate(seed)
        return [(sc, m.diverged, m.diverged_why)
                for sc, m in zip(results, self.t.members, strict=True)]

    def play(self, algos: dict[int, dict[str, Any]], matches: list[list[int]],
             seed: int) -> list[dict[str, np.ndarray]]:
        """Matches between members sent as algorithm states ({member id: state}; a match names
        its members' ids, team after team), on this group's evaluation envs: each match's
        per-agent episode returns."""
        t = self.t
        assert t.teams is not None, "matches are between the teams' members"
        played = {i: restore_algo(t.cfg, t.spec, st, t.device) for i, st in algos.items()}
        return [t.scored_returns([(played[i], agents)
                                  for i, (_, agents) in zip(match, t.teams, strict=True)],
                                 seed) for match in matches]

    # ------------------------------------------------------------------ replay copy
    def buffer_state(self) -> dict[str, Any]:
        return self.t.buffer_state()

    def load_buffer(self, state: dict[str, Any]) -> int:
        self.t.load_buffer(state)
        return self.t.held()

    def close(self) -> None:
        self.t.close()
