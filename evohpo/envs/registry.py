"""Environment registry: short mpe2 names, any PettingZoo ParallelEnv by ``module:factory``, and
the :class:`~evohpo.envs.spec.EnvSpec` read off a built env (:func:`spec_of`, :func:`probe`).
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import os
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from evohpo.envs.spec import AgentSpec, EnvSpec
from evohpo.envs.teams import derive_teams
from evohpo.errors import ConfigError, closest

# short name -> mpe2 module (the versioned module names change; users type the short ones)
MPE2_ENVS: dict[str, str] = {
    "simple": "mpe2.simple_v3",
    "simple_adversary": "mpe2.simple_adversary_v3",
    "simple_crypto": "mpe2.simple_crypto_v3",
    "simple_push": "mpe2.simple_push_v3",
    "simple_reference": "mpe2.simple_reference_v3",
    "simple_speaker_listener": "mpe2.simple_speaker_listener_v4",
    "simple_spread": "mpe2.simple_spread_v3",
    "simple_tag": "mpe2.simple_tag_v3",
    "simple_world_comm": "mpe2.simple_world_comm_v3",
    "collect_treasure": "mpe2.collect_treasure_v1",
    "simple_formation": "mpe2.simple_formation_v1",
    "simple_line": "mpe2.simple_line_v1",
}
# envs given to the Python API as callables that cannot be imported by name (a lambda, a closure)
CALLABLE_ENVS: dict[str, Callable[..., Any]] = {}


def register_env(factory: Callable[..., Any]) -> str:
    """The ``env.name`` of a factory: ``module:name`` where it can be imported by that name (so
    the CLI, resume and other processes can rebuild it), else a name known in this process."""
    module, qualname = getattr(factory, "__module__", None), getattr(factory, "__qualname__", "")
    if module and module != "__main__" and qualname.isidentifier():
        with contextlib.suppress(Exception):
            if getattr(importlib.import_module(module), qualname) is factory:
                return f"{module}:{qualname}"
    name = f"callable:{qualname or type(factory).__name__}-{id(factory):x}"
    CALLABLE_ENVS[name] = factory
    return name


def _import_factory_module(name: str, mod_name: str) -> Any:
    """Import ``mod_name`` as ``python -m`` would find it: on sys.path, else in the working
    directory (which the installed ``evohpo`` command does not put on sys.path)."""
    top = mod_name.partition(".")[0]
    for attempt in range(2):
        try:
            return importlib.import_module(mod_name)
        except ModuleNotFoundError as e:
            cwd = os.getcwd()
            if e.name != top:  # the module was found; something it imports was not
                raise ConfigError(f"env {name!r}: cannot import module {mod_name!r}: "
                                  f"ModuleNotFoundError: {e}") from None
            if attempt or {cwd, ""} & set(sys.path) or not any(
                    os.path.exists(os.path.join(cwd, top + ext)) for ext in (".py", "")):
                raise ConfigError(
                    f"env {name!r}: cannot import module {mod_name!r}: no {top!r} on the "
                    f"Python path (sys.path, PYTHONPATH) nor in the working directory {cwd!r}; "
                    f"run from the folder that holds {mod_name.replace('.', '/')}.py, or add "
                    "it to PYTHONPATH") from None
            sys.path.append(cwd)  # after everything installed: a local file shadows nothing
            importlib.invalidate_caches()
        except Exception as e:
            raise ConfigError(f"env {name!r}: cannot import module {mod_name!r}: "
                              f"{type(e).__name__}: {e}") from None
    raise AssertionError("unreachable")


def factory_of(name: str) -> Callable[..., Any]:
    """The callable that builds env ``name``: an mpe2 module's parallel_env, module:factory, or
    a callable the Python API registered."""
    if name in CALLABLE_ENVS:
        return CALLABLE_ENVS[name]
    if name in MPE2_ENVS:
        return importlib.import_module(MPE2_ENVS[name]).parallel_env
    if name.startswith("callable:"):
        raise ConfigError(
            f"env {name!r}: the run was trained on a callable that only the process that "
            "trained it knew (a lambda or a function in a script); in Python pass it again: "
            "evohpo.load_run(run_dir, env=make_env); to use the command line, train on a "
            "factory importable by name (module:factory)")
    if ":" not in name:
        raise ConfigError(f"unknown env {name!r}{closest(name, list(MPE2_ENVS))}; known: "
                          f"{', '.join(MPE2_ENVS)}, or module:factory for any PettingZoo "
                          "ParallelEnv")
    mod_name, _, attr = name.partition(":")
    module = _import_factory_module(name, mod_name)
    factory = getattr(module, attr, None)
    if not callable(factory):
        raise ConfigError(f"env {name!r}: module {mod_name!r} has no callable {attr!r}")
    return factory


def _make(name: str, kwargs: dict[str, Any]) -> Any:
    from evohpo.envs.factory import check_kwargs

    factory = factory_of(name)
    if name in MPE2_ENVS:
        # parallel_env takes **kwargs for raw_env, whose signature says what each one is
        check_kwargs(name, importlib.import_module(MPE2_ENVS[name]).raw_env, kwargs)
        try:
            return factory(**kwargs)
        except TypeError as e:
            raise ConfigError(f"env {name!r}: bad env.kwargs {kwargs}: {e}") from None
    check_kwargs(name, factory, kwargs)
    try:
        env = factory(**kwargs)
    except Exception as e:
        raise ConfigError(f"env {name!r}: the factory raised {type(e).__name__}: {e}") from None
    return env


def _check_parallel(env: Any, name: str) -> None:
    from pettingzoo.utils.env import ParallelEnv

    if not isinstance(env, ParallelEnv):
        raise ConfigError(f"env {name!r}: the factory returned {type(env).__name__}, "
                          "not a PettingZoo ParallelEnv")


def make_env(name: str, kwargs: dict[str, Any] | None = None) -> Any:
    """One env instance, checked to be a PettingZoo ParallelEnv."""
    env = _make(name, dict(kwargs or {}))
    _check_parallel(env, name)
    return env


def env_fn(name: str, kwargs: dict[str, Any] | None = None) -> Callable[[], Any]:
    """A picklable zero-argument constructor (for subprocess workers)."""
    return functools.partial(make_env, name, dict(kwargs or {}))


def spec_of(env: Any, name: str) -> EnvSpec:
    """Read every agent's spaces; reject the ones evohpo cannot train on, saying which."""
    from gymnasium import spaces

    agents = tuple(env.possible_agents)
    if not agents:
        raise ConfigError(f"env {name!r} has no agents")
    per: dict[str, AgentSpec] = {}
    for a in agents:
        ob = env.observation_space(a)
        ac = env.action_space(a)
        if not isinstance(ob, spaces.Box) or len(ob.shape) != 1:
            raise ConfigError(f"env {name!r}, agent {a!r}: observation space {ob} is not "
                              "supported; evohpo supports flat Box observations")
        if isinstance(ac, spaces.Discrete):
            if ac.start != 0:
                raise ConfigError(f"env {name!r}, agent {a!r}: Discrete action space with "
                                  f"start={ac.start} is not supported; actions must start at 0")
            per[a] = AgentSpec(obs_dim=int(ob.shape[0]), discrete=True, act_dim=int(ac.n))
        elif isinstance(ac, spaces.Box) and len(ac.shape) == 1:
            low, high = np.unique(ac.low), np.unique(ac.high)
            if (len(low) != 1 or len(high) != 1 or not np.isfinite(low[0])
                    or not np.isfinite(high[0])):
                raise ConfigError(f"env {name!r}, agent {a!r}: action space {ac} is not supported; "
                                  "Box actions need finite bounds, equal across dimensions")
            per[a] = AgentSpec(obs_dim=int(ob.shape[0]), discrete=False, act_dim=int(ac.shape[0]),
                               low=float(low[0]), high=float(high[0]))
        else:
            raise ConfigError(f"env {name!r}, agent {a!r}: action space {ac} is not supported; "
                              "evohpo supports Discrete and flat Box actions")
    return EnvSpec(name=name, agents=agents, per_agent=per, teams=derive_teams(name, agents))


def probe(name: str, kwargs: dict[str, Any] | None = None) -> EnvSpec:
    """Build one env to read its spec and derive its teams, then close it."""
    env = make_env(name, kwargs)
    try:
        return spec_of(env, name)
    finally:
        env.close()
