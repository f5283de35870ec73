"""A trained run as users hold it (:func:`evohpo.api.load_run`): its config, spec and metrics,
and its members as agents that act without exploration noise."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from evohpo import config as C


@dataclass
class Agent:
    """A trained member: its algorithm, acting without exploration noise."""

    id: int | None
    algo: Any
    info: dict[str, Any]

    def act(self, obs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Actions for a batch of observations (``{agent: [B, obs_dim]}``; one row is fine too).

        Discrete agents get action indices ``[B]``, continuous ones vectors ``[B, act_dim]``.
        """
        spec = self.algo.spec
        batch = {a: np.atleast_2d(np.asarray(obs[a], np.float32)) for a in spec.agents}
        actions, _ = self.algo.act(batch, None)
        return {a: (actions[a][:, 0].astype(np.int64) if spec[a].discrete else actions[a])
                for a in spec.agents}


@dataclass
class Run:
    """A run directory: its config, env spec and metrics, and access to its members."""

    run_dir: Path
    config: C.Config

    @property
    def spec(self) -> Any:
        from evohpo.envs import spec_for

        return spec_for(self.config.env)

    @property
    def metrics(self) -> list[dict[str, Any]]:
        from evohpo.report.data import read_jsonl

        return read_jsonl(self.run_dir / "metrics.jsonl")

    def member(self, which: str | int = "best") -> Agent:
        from evohpo.playback.load import load_member

        _, _, algo, info = load_member(self.run_dir, str(which))
        return Agent(info.get("id"), algo, info)

    def evaluate(self, which: str | int = "best", episodes: int | None = None,
                 seed: int = 0) -> dict[str, np.ndarray]:
        """Per-agent returns of complete noise-free episodes, as the trainer scores them."""
        from evohpo.runtime.evaluate import play

        agent = self.member(which)
        return play(self.config, agent.algo, agent.algo.spec,
                    episodes or self.config.eval.episodes, seed)
