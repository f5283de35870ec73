"""Play an exported team (``evohpo export``) in a PettingZoo loop: :class:`Team` reads
``spaces.json``, loads each agent's actor and keeps each agent's last ``frames`` observations
(``env.frames``), so that it takes an env's own observations, one per agent or a batch.

Only numpy and torch are imported here: none of evohpo's training code.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch


class Team:
    """The actors of an export directory, acting on an env's observations.

    ``act({agent: obs})`` with one observation per agent (1-D, as a ParallelEnv gives them)
    returns one action per agent, as ``env.step`` takes it; with batches ``[B, obs_dim]`` it
    returns batches. Float32 or float64. Call :meth:`reset` when a new episode starts: the
    first observation then fills every frame, as in training.
    """

    def __init__(self, folder: str | Path):
        self.folder = Path(folder)
        self.note: dict[str, Any] = json.loads((self.folder / "spaces.json").read_text())
        self.frames = int(self.note.get("frames", 1))
        self.env_kwargs: dict[str, Any] = dict(self.note.get("env_kwargs") or {})
        self.actors = {a: torch.export.load(self.folder / s["file"]).module()
                       for a, s in self.note["agents"].items()}
        self.history: dict[str, np.ndarray] = {}  # agent -> [B, frames, frame_dim]

    def reset(self) -> None:
        """A new episode: no earlier observations."""
        self.history = {}

    def make_env(self, **kwargs: Any) -> Any:
        """The env the team was trained on (spaces.json's ``env_factory``), with its env_kwargs
        (``kwargs`` override them)."""
        where = self.note.get("env_factory")
        if not where:
            raise ValueError(f"{self.folder / 'spaces.json'} names no importable env factory "
                             f"(env {self.note.get('env')!r}); build the env yourself")
        module, _, name = where.partition(":")
        return getattr(importlib.import_module(module), name)(**{**self.env_kwargs, **kwargs})

    def stacked(self, agent: str, obs: np.ndarray) -> np.ndarray:
        """``obs`` [B, frame_dim] pushed onto ``agent``'s frames: [B, frames * frame_dim], the
        newest first."""
        h = self.history.get(agent)
        if h is None or h.shape[0] != len(obs):
            h = np.repeat(obs[:, None], self.frames, axis=1)  # an episode's start: standing still
        else:
            h = np.concatenate([obs[:, None], h[:, :-1]], axis=1)
        self.history[agent] = h
        return h.reshape(len(obs), -1)

    def act(self, obs: Mapping[str, Any]) -> dict[str, Any]:
        single = all(np.ndim(o) == 1 for o in obs.values())
        out = {}
        for a, o in obs.items():
            batch = np.atleast_2d(np.asarray(o, np.float32))
            with torch.no_grad():
                act = self.actors[a](torch.from_numpy(self.stacked(a, batch))).numpy()
            out[a] = act[0] if single else act
        return out
