"""The run's own state: what the loop owns between windows, and how a checkpoint holds it.

A checkpoint is this state plus the runtime's (envs, replay memory, the window's bookkeeping):
``{"generation", "env_steps", ..., "members": [member records], "loop": ..., "files": ...}`` as
JSON metadata, and the members' algorithm states, the envs and the replay memory as tensors.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from evohpo import checkpoint
from evohpo.algos import restore_algo
from evohpo.checkpoint import rng_from, rng_state
from evohpo.config import Config, to_dict
from evohpo.envs.spec import EnvSpec
from evohpo.evolve.member import Member, member_from, member_meta


@dataclass
class RunState:
    """Counters, the population and the loop's random streams."""

    eval_rng: np.random.Generator     # evaluation episode seeds
    evo_rng: np.random.Generator      # selection, mutation and clone seeds
    members: list[Member] = field(default_factory=list)
    generation: int = 0
    env_steps: int = 0                # the population's env steps so far
    window_steps: int = 0             # env steps each member collected in this window
    next_id: int = 0                  # the id the next new member gets
    best_ever: float = -np.inf
    elapsed_before: float = 0.0       # wall seconds the run spent before it was resumed
    window_before: float = 0.0        # wall seconds the current window ran before that
    phases_before: dict[str, float] = field(default_factory=dict)  # ... and in which phases

    def to_checkpoint(self, cfg: Config, elapsed_s: float, run_dir: Path | None,
                      window_s: float = 0.0, budget_end: bool = False,
                      phases: dict[str, float] | None = None,
                      ) -> tuple[dict[str, Any], dict[str, Any]]:
        """``window_s``: wall seconds of the current window so far (``phases``: its seconds per
        phase, :mod:`evohpo.runtime.phases`); ``budget_end``: taken at the budget's end, before
        the generation's line (which a resumed run does not show again)."""
        from evohpo.version import __version__

        meta = {
            "evohpo": __version__, "config": to_dict(cfg),
            "generation": self.generation, "env_steps": self.env_steps,
            "window_steps": self.window_steps, "next_id": self.next_id,
            "best_ever": self.best_ever if np.isfinite(self.best_ever) else None,
            "eval_rng": rng_state(self.eval_rng), "evo_rng": rng_state(self.evo_rng),
            "members": [member_meta(m) for m in self.members],
            "files": checkpoint.run_files(run_dir), "elapsed_s": elapsed_s,
            "window_s": window_s, "window_phases": phases or {}, "budget_end": budget_end,
        }
        return meta, {"members": [m.algo.state_dict() for m in self.members]}

    @classmethod
    def from_checkpoint(cls, cfg: Config, spec: EnvSpec, meta: dict[str, Any],
                        tensors: dict[str, Any], device: torch.device | str) -> RunState:
        members = [member_from(m, restore_algo(cfg, spec, st, device))
                   for m, st in zip(meta["members"], tensors["members"], strict=True)]
        return cls(eval_rng=rng_from(meta["eval_rng"]), evo_rng=rng_from(meta["evo_rng"]),
                   members=members, generation=meta["generation"], env_steps=meta["env_steps"],
                   window_steps=meta["window_steps"], next_id=meta["next_id"],
                   best_ever=-np.inf if meta["best_ever"] is None else meta["best_ever"],
                   elapsed_before=float(meta.get("elapsed_s", 0.0)),
                   window_before=float(meta.get("window_s", 0.0)),
                   phases_before={k: float(v) for k, v in meta.get("window_phases", {}).items()})
