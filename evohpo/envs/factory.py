"""What an env factory accepts, read from its signature: env.kwargs are checked against it
before the env is built, and ``--render`` knows whether the env can render at all.

A parameter's type is known from its annotation (a type, or a string of simple type names as
mpe2 writes them: ``'int'``, ``'str | None'``) or else from its default's type; where neither
tells, any value is passed on.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from evohpo.errors import ConfigError, closest

SIMPLE = {"bool": bool, "int": int, "float": float, "str": str, "None": type(None)}


def unwrap(factory: Callable[..., Any]) -> Callable[..., Any]:
    """Through PettingZoo's ``parallel_wrapper_fn(env_fn)`` (it takes **kwargs for env_fn)."""
    for _ in range(4):
        code = getattr(factory, "__code__", None)
        cells = getattr(factory, "__closure__", None) or ()
        if code is None or "env_fn" not in code.co_freevars:
            break
        inner = cells[code.co_freevars.index("env_fn")].cell_contents
        if not callable(inner):
            break
        factory = inner
    return factory


def parameters(factory: Callable[..., Any]) -> tuple[dict[str, inspect.Parameter], bool] | None:
    """(named keyword parameters, whether it also takes any **kwargs), or None if unreadable."""
    try:
        sig = inspect.signature(unwrap(factory))
    except (TypeError, ValueError):
        return None
    named = {
        n: p
        for n, p in sig.parameters.items()
        if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    }
    return named, any(p.kind == p.VAR_KEYWORD for p in sig.parameters.values())


def allowed_types(p: inspect.Parameter) -> tuple[type, ...] | None:
    """The types a parameter takes, where its annotation or default says; else None."""
    ann = p.annotation
    if isinstance(ann, str):
        names = [s.strip() for s in ann.split("|")]
        if all(n in SIMPLE for n in names):
            return tuple(SIMPLE[n] for n in names)
    elif ann in SIMPLE.values():
        return (ann,)
    if ann is inspect.Parameter.empty and type(p.default) in (bool, int, float, str):
        return (type(p.default),)
    return None


def fits(value: Any, types: tuple[type, ...]) -> bool:
    if isinstance(value, bool):  # bool is an int to Python, not to an env's int parameter
        return bool in types
    if isinstance(value, int) and float in types:
        return True
    return isinstance(value, types)


def signature_text(named: dict[str, inspect.Parameter]) -> str:
    return ", ".join(n if p.default is p.empty else f"{n}={p.default!r}" for n, p in named.items())


def check_kwargs(env: str, factory: Callable[..., Any], kwargs: dict[str, Any]) -> None:
    """Every env.kwargs key a parameter of the factory, every value of the parameter's type."""
    params = parameters(factory)
    if params is None:
        return
    named, any_kwargs = params
    for k, v in kwargs.items():
        p = named.get(k)
        if p is None:
            if any_kwargs:
                continue
            raise ConfigError(
                f"config key 'env.kwargs.{k}': env {env!r} takes no argument {k!r}"
                f"{closest(k, list(named))}; it takes: {signature_text(named)}"
            )
        types = allowed_types(p)
        if types is not None and not fits(v, types):
            want = " or ".join("null" if t is type(None) else t.__name__ for t in types)
            raise ConfigError(
                f"config key 'env.kwargs.{k}': {v!r} is not {want} (env {env!r} "
                f"takes {k}={p.default!r})"
            )
