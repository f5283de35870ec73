"""Environments: registry, spec, and vector pools (sync, async, and batched mpe2)."""

from __future__ import annotations

from typing import Any

from evohpo.config.schema import EnvConfig
from evohpo.envs.pool import StepResult, SyncPool, VectorPool
from evohpo.envs.registry import MPE2_ENVS, env_fn, make_env, probe, spec_of
from evohpo.envs.spec import EnvSpec, Team
from evohpo.envs.teams import resolve_teams
from evohpo.errors import ConfigError

__all__ = ["MPE2_ENVS", "EnvSpec", "StepResult", "SyncPool", "Team", "VectorPool",
           "env_fn", "make_env", "make_pool", "probe", "resolve_backend", "spec_for", "spec_of"]


def resolve_backend(name: str, kwargs: dict[str, Any], backend: str) -> str:
    """'pettingzoo' or 'batched': auto takes the batched backend where the env has one."""
    from evohpo.envs.batched import SCENARIOS, unsupported

    if backend == "pettingzoo":
        return backend
    why = unsupported(name, kwargs)
    if backend == "auto":
        return "pettingzoo" if why else "batched"
    if why:
        raise ConfigError(f"config key 'env.backend': 'batched' cannot run this env: {why}; "
                          f"batched envs: {', '.join(SCENARIOS)}; use 'auto' or 'pettingzoo'")
    return backend


def spec_for(env_cfg: EnvConfig) -> EnvSpec:
    """The spec of a run's env (the ``env`` config section): its teams as ``env.teams`` says,
    its observations stacked ``env.frames`` deep."""
    spec = resolve_teams(probe(env_cfg.name, env_cfg.kwargs), env_cfg.teams)
    return spec.stacked(env_cfg.frames) if env_cfg.frames > 1 else spec


def make_pool(name: str, kwargs: dict[str, Any], num_envs: int, pool: str = "sync",
              spec: EnvSpec | None = None, workers: int = 0, timeout: float = 60.0,
              backend: str = "pettingzoo") -> VectorPool:
    """A pool of ``num_envs`` copies of env ``name``.

    ``backend`` pettingzoo: PettingZoo envs, ``pool`` sync (in process) or async (in workers);
    batched: every env in one numpy step (in process; ``pool`` and ``workers`` do not apply);
    auto: batched where the env has it. The default stays pettingzoo so that code comparing a
    pool with mpe2 envs of the same seed keeps doing so; the trainer passes ``env.backend``.
    A ``spec`` of stacked observations (``spec.frames`` > 1) gives a pool that stacks them.
    """
    if spec is not None and spec.frames > 1:
        from evohpo.envs.frames import FramePool

        inner = make_pool(name, kwargs, num_envs, pool, spec.unstacked(), workers, timeout,
                          backend)
        return FramePool(inner, spec)
    spec = spec or probe(name, kwargs)
    if resolve_backend(name, kwargs, backend) == "batched":
        from evohpo.envs.batched.pool import BatchedPool

        return BatchedPool(name, kwargs, num_envs, spec)
    fns = [env_fn(name, kwargs) for _ in range(num_envs)]
    if pool == "sync":
        return SyncPool(fns, spec)
    from evohpo.envs.async_pool import AsyncPool

    return AsyncPool(fns, spec, workers=workers, timeout=timeout, name=name)
