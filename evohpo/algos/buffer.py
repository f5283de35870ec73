"""The shared multi-agent replay memory.

One buffer for the whole population: every member's experience goes in, every member samples
from all of it. Storage is preallocated and circular. Each field is one joint array whose
columns are the agents' blocks (agents are heterogeneous, so the blocks have different widths);
sampling a batch is then one gather per field, whatever the number of agents.

On a game of several teams a buffer may also keep each transition's *next actions*: what every
agent's policy (the one that played that env, without exploration noise) does at the next
observation. A member that trains only its own team takes the other teams' next actions from
there for its critics' targets, instead of from a model of them it would have to learn.
"""

from __future__ import annotations

import itertools
from typing import NamedTuple

import numpy as np
import torch

from evohpo.envs.spec import EnvSpec


class Batch(NamedTuple):
    obs: dict[str, torch.Tensor]         # [B, obs_dim]
    actions: dict[str, torch.Tensor]     # [B, act_dim] (one-hot for discrete agents)
    rewards: dict[str, torch.Tensor]     # [B]
    next_obs: dict[str, torch.Tensor]    # [B, obs_dim] the real next observation
    terminated: dict[str, torch.Tensor]  # [B] 1.0 where the episode terminated (not truncated)
    alive: dict[str, torch.Tensor]       # [B] 1.0 where the agent acted (agents may leave early)
    # [B, act_dim] what each agent's policy did at next_obs (buffers that keep them; else None)
    next_actions: dict[str, torch.Tensor] | None = None


def _blocks(widths: list[int]) -> list[slice]:
    edges = np.concatenate([[0], np.cumsum(widths)]).astype(int)
    return [slice(int(a), int(b)) for a, b in itertools.pairwise(edges)]


class ReplayBuffer:
    FIELDS = ("obs", "next_obs", "actions", "rewards", "terminated", "alive")
    NEXT = "next_actions"  # the optional field

    def __init__(self, spec: EnvSpec, capacity: int, device: torch.device | str = "cpu",
                 next_actions: bool = False):
        self.spec = spec
        self.agents = spec.agents
        self.capacity = int(capacity)
        self.device = torch.device(device)
        obs_w = [spec[a].obs_dim for a in self.agents]
        act_w = [spec[a].act_dim for a in self.agents]
        self.obs_slices = dict(zip(self.agents, _blocks(obs_w), strict=True))
        self.act_slices = dict(zip(self.agents, _blocks(act_w), strict=True))
        n_ag = len(self.agents)
        self.obs = np.zeros((capacity, sum(obs_w)), np.float32)
        self.next_obs = np.zeros((capacity, sum(obs_w)), np.float32)
        self.actions = np.zeros((capacity, sum(act_w)), np.float32)
        self.rewards = np.zeros((capacity, n_ag), np.float32)
        self.terminated = np.zeros((capacity, n_ag), np.float32)
        self.alive = np.zeros((capacity, n_ag), np.float32)
        self.fields = self.FIELDS + ((self.NEXT,) if next_actions else ())
        if next_actions:
            self.next_actions = np.zeros((capacity, sum(act_w)), np.float32)
        self.pos = 0    # next row to write
        self.size = 0   # rows holding data
        self.added = 0  # transitions ever added

    @staticmethod
    def bytes_for(spec: EnvSpec, capacity: int, next_actions: bool = False) -> int:
        obs = sum(spec[a].obs_dim for a in spec.agents)
        act = sum(spec[a].act_dim for a in spec.agents)
        return 4 * capacity * (2 * obs + (1 + next_actions) * act + 3 * len(spec.agents))

    @property
    def has_next_actions(self) -> bool:
        return self.NEXT in self.fields

    @property
    def nbytes(self) -> int:
        return sum(getattr(self, k).nbytes for k in self.fields)

    def __len__(self) -> int:
        return self.size

    def add(self, obs: dict[str, np.ndarray], actions: dict[str, np.ndarray],
            rewards: dict[str, np.ndarray], next_obs: dict[str, np.ndarray],
            terminated: dict[str, np.ndarray], alive: dict[str, np.ndarray] | None = None,
            next_actions: dict[str, np.ndarray] | None = None) -> int:
        """Add one vector step: every array is [n, ...] with the same n (the envs).

        ``next_actions`` is required by, and only taken by, a buffer that keeps them.

        Rows holding NaN or inf (a faulty env, a diverged policy) are dropped, not stored:
        one poisoned transition would reach every member. Returns how many were dropped.
        """
        n = len(rewards[self.agents[0]])
        if n > self.capacity:
            raise ValueError(f"cannot add {n} transitions to a buffer of capacity {self.capacity}")
        ok = np.ones(n, bool)
        for a in self.agents:
            ok &= np.isfinite(obs[a]).all(1) & np.isfinite(next_obs[a]).all(1)
            ok &= np.isfinite(actions[a]).all(1) & np.isfinite(rewards[a])
        keep_next = self.has_next_actions
        if keep_next != (next_actions is not None):
            raise ValueError("next_actions must be given to a buffer that keeps them, and only "
                             "to one")
        if next_actions is not None:
            for a in self.agents:
                ok &= np.isfinite(next_actions[a]).all(1)
        rows = np.flatnonzero(ok) if not ok.all() else slice(None)
        m = int(ok.sum())
        # rows pos..pos+m, as a slice (a view: the fast assignment) unless they wrap around
        idx: slice | np.ndarray = (slice(self.pos, self.pos + m) if self.pos + m <= self.capacity
                                   else (self.pos + np.arange(m)) % self.capacity)
        for j, a in enumerate(self.agents):
            self.obs[idx, self.obs_slices[a]] = obs[a][rows]
            self.next_obs[idx, self.obs_slices[a]] = next_obs[a][rows]
            # an agent that did not act has no action: zeros, not what its policy would have said
            act = actions[a][rows] if alive is None else actions[a][rows] * alive[a][rows, None]
            self.actions[idx, self.act_slices[a]] = act
            self.rewards[idx, j] = rewards[a][rows]
            self.terminated[idx, j] = terminated[a][rows]
            self.alive[idx, j] = 1.0 if alive is None else alive[a][rows]
            if next_actions is not None:
                self.next_actions[idx, self.act_slices[a]] = next_actions[a][rows]
        self.pos = int((self.pos + m) % self.capacity)
        self.size = min(self.size + m, self.capacity)
        self.added += m
        return n - m

    def sample(self, batch_size: int, rng: np.random.Generator) -> Batch:
        """A uniform batch (with replacement) drawn with the caller's generator."""
        if self.size == 0:
            raise ValueError("cannot sample from an empty replay buffer")
        idx = rng.integers(0, self.size, size=batch_size)
        return self.gather(idx)

    def sample_each(self, sizes: list[int], rngs: list[np.random.Generator],
                    chunk: int | None = None) -> tuple[Batch, torch.Tensor]:
        """One batch per caller, in one gather, laid out in chunks of ``chunk`` rows (default: the
        largest size, one chunk each): ``[C, chunk, ...]`` tensors, caller ``j``'s draws (the rows
        :meth:`sample` would give it) in its ``ceil(sizes[j] / chunk)`` chunks, in order, after
        the chunks of the callers before it, the last one padded; and ``[C, chunk]`` ones on its
        rows, zeros on the padding."""
        if self.size == 0:
            raise ValueError("cannot sample from an empty replay buffer")
        width = chunk or max(sizes)
        counts = [-(-n // width) for n in sizes]
        idx = np.zeros((sum(counts), width), np.int64)
        rows = np.zeros((sum(counts), width), np.float32)
        at = 0
        for n, c, rng in zip(sizes, counts, rngs, strict=True):
            idx[at:at + c].reshape(-1)[:n] = rng.integers(0, self.size, size=n)
            rows[at:at + c].reshape(-1)[:n] = 1.0
            at += c
        return self.gather(idx), torch.from_numpy(rows).to(self.device)

    def gather(self, idx: np.ndarray) -> Batch:
        """The rows ``idx`` (any shape): tensors of shape ``idx.shape + (width,)``."""
        dev = self.device
        shape = idx.shape
        idx = idx.reshape(-1)

        def t(x: np.ndarray) -> torch.Tensor:
            return torch.from_numpy(x.reshape(*shape, x.shape[1])).to(dev, non_blocking=True)

        obs, nxt, act = t(self.obs[idx]), t(self.next_obs[idx]), t(self.actions[idx])
        rew, term, alive = t(self.rewards[idx]), t(self.terminated[idx]), t(self.alive[idx])
        nact = t(self.next_actions[idx]) if self.has_next_actions else None
        return Batch(
            obs={a: obs[..., s] for a, s in self.obs_slices.items()},
            actions={a: act[..., s] for a, s in self.act_slices.items()},
            rewards={a: rew[..., j] for j, a in enumerate(self.agents)},
            next_obs={a: nxt[..., s] for a, s in self.obs_slices.items()},
            terminated={a: term[..., j] for j, a in enumerate(self.agents)},
            alive={a: alive[..., j] for j, a in enumerate(self.agents)},
            next_actions=None if nact is None else {a: nact[..., s]
                                                    for a, s in self.act_slices.items()},
        )


    def state_dict(self) -> dict[str, np.ndarray | int]:
        """A copy of the filled rows, in their physical order (so a resumed run samples the
        same)."""
        n = self.size
        state: dict[str, np.ndarray | int] = {k: getattr(self, k)[:n].copy() for k in self.fields}
        state.update(pos=self.pos, size=n, added=self.added, capacity=self.capacity)
        return state

    def load_state_dict(self, state: dict[str, np.ndarray | int]) -> None:
        n, pos = int(state["size"]), int(state["pos"])
        if n > self.capacity:
            raise ValueError(f"saved buffer holds {n} transitions, more than capacity "
                             f"{self.capacity}")
        order = np.arange(n)
        if int(state["capacity"]) != self.capacity:
            # another capacity: lay the rows out oldest first, so new rows overwrite the oldest
            order = (pos + np.arange(n)) % n if n == int(state["capacity"]) else order
            pos = n % self.capacity
        if self.has_next_actions and self.NEXT not in state and n:
            raise ValueError("the saved replay memory has no next actions, which this run's "
                             "critics need (games.opponent_actions: played)")
        for k in self.fields:
            if k in state:  # "alive" came later: older states mean everyone acted
                getattr(self, k)[:n] = np.asarray(state[k])[order]
            else:
                getattr(self, k)[:n] = 1.0
        self.pos, self.size, self.added = pos, n, int(state["added"])


def human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    return f"{n:.1f} GiB"
