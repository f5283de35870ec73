"""Environments: registry, spec, and vector pools (sync and async)."""

from __future__ import annotations

from typing import Any

from evohpo.envs.pool import StepResult, SyncPool, VectorPool
from evohpo.envs.registry import ENVS, EnvSpec, env_fn, make_env, probe, spec_of

__all__ = ["ENVS", "EnvSpec", "StepResult", "SyncPool", "VectorPool", "env_fn", "make_env",
           "make_pool", "probe", "spec_of"]


def make_pool(name: str, kwargs: dict[str, Any], num_envs: int, pool: str = "sync",
              spec: EnvSpec | None = None, workers: int = 0, timeout: float = 60.0) -> VectorPool:
    """A pool of ``num_envs`` copies of env ``name``: ``sync`` in process, ``async`` in workers."""
    spec = spec or probe(name, kwargs)
    fns = [env_fn(name, kwargs) for _ in range(num_envs)]
    if pool == "sync":
        return SyncPool(fns, spec)
    if pool == "async":
        from evohpo.envs.async_pool import AsyncPool

        return AsyncPool(fns, spec, workers=workers, timeout=timeout, name=name)
    from evohpo.errors import ConfigError

    raise ConfigError(f"config key 'env.pool': {pool!r} is not one of 'sync', 'async'")
