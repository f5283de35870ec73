"""The env steps a run spends: its budget in whole steps of the env pool.

Every env of the pool advances on each vector step, so a run moves in steps of ``env.num_envs``
env steps. A budget that is not a multiple of that cannot be met exactly; the run stops at the
last whole vector step within it (never past it), and its final line says so.
"""

from __future__ import annotations

from evohpo.config import Config


def whole_steps(cfg: Config) -> int:
    """``steps`` rounded down to a multiple of ``env.num_envs``: where the run stops."""
    return cfg.steps - cfg.steps % cfg.env.num_envs


def rounding(cfg: Config, env_steps: int) -> str:
    """What the final line adds after a run's env steps: the rounding, where it stopped there."""
    if env_steps != whole_steps(cfg) or env_steps == cfg.steps:
        return ""
    return (f" (the budget, {cfg.steps:,}, rounded down to whole steps of the "
            f"{cfg.env.num_envs} envs)")
