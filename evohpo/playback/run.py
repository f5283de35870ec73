"""A finished (or running) run in Python: its config, env spec and metrics, and its members to
act with or evaluate (:func:`evohpo.load_run`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from evohpo import config as C
from evohpo.algos import Algorithm
from evohpo.envs import spec_for
from evohpo.envs.spec import EnvSpec
from evohpo.playback.load import load_member, run_config
from evohpo.report.data import read_jsonl
from evohpo.runtime.evaluate import play


@dataclass
class Agent:
    """A trained member: its algorithm, acting without exploration noise."""

    id: int | None
    algo: Algorithm
    info: dict[str, Any]

    def act(self, obs: Mapping[str, np.ndarray]) -> dict[str, Any]:
        """Actions for one observation per agent, or for a batch of them.

        One observation per agent (1-D arrays, as a PettingZoo ParallelEnv gives them): one action
        per agent, as ``env.step`` takes it: an index for a discrete agent, a vector
        ``[act_dim]`` for a continuous one. A batch (``{agent: [B, obs_dim]}``): index arrays
        ``[B]`` and arrays ``[B, act_dim]``.
        """
        spec = self.algo.spec
        single = all(np.ndim(obs[a]) == 1 for a in spec.agents)
        batch = {a: np.atleast_2d(np.asarray(obs[a], np.float32)) for a in spec.agents}
        actions, _ = self.algo.act(batch, None)
        out = {a: (actions[a][:, 0].astype(np.int64) if spec[a].discrete else actions[a])
               for a in spec.agents}
        return {a: v[0] for a, v in out.items()} if single else out


@dataclass
class Run:
    """A run directory: its config, env spec and metrics, and access to its members."""

    run_dir: Path
    config: C.Config

    @property
    def spec(self) -> EnvSpec:
        return spec_for(self.config.env)

    @property
    def metrics(self) -> list[dict[str, Any]]:
        return read_jsonl(self.run_dir / "metrics.jsonl")

    def member(self, which: str | int = "best") -> Agent:
        _, _, algo, info = load_member(self.run_dir, str(which))
        return Agent(info.get("id"), algo, info)

    def evaluate(self, which: str | int = "best", episodes: int | None = None,
                 seed: int | None = None) -> dict[str, np.ndarray]:
        """Per-agent returns of complete noise-free episodes of ``seed``, as the trainer scores
        them. By default, as ``evohpo eval``: the episodes best.pt's score was measured on (for
        its member), else ``eval.episodes`` episodes of seed 0."""
        agent = self.member(which)
        info = agent.info
        return play(self.config, agent.algo, agent.algo.spec,
                    episodes or info.get("episodes") or self.config.eval.episodes,
                    int(info.get("eval_seed", 0)) if seed is None else seed)


def load_run(run_dir: str | Path, env: Callable[..., Any] | None = None) -> Run:
    """The run in ``run_dir``. A run trained on a callable that only its own process knew (a
    lambda, a function in a script: ``env.name: callable:...``) needs that callable again as
    ``env``; a run whose env is stored by name rebuilds it from the name."""
    path = Path(run_dir)
    if env is not None:
        from evohpo.envs.registry import CALLABLE_ENVS

        raw = C.read_yaml(path / "config.yaml") if (path / "config.yaml").is_file() else {}
        name = (raw.get("env") or {}).get("name", "") if isinstance(raw, dict) else ""
        if isinstance(name, str) and name.startswith("callable:"):
            CALLABLE_ENVS[name] = env
    return Run(path, run_config(path))
