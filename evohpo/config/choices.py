"""Config keys whose value names an entry of a registry: the names come from the registry, read
when a config is checked or listed (so that a new entry needs no change here)."""

from __future__ import annotations

from collections.abc import Callable


def _algos() -> tuple[str, ...]:
    from evohpo.algos.switches import names

    return names()


def _strategies() -> tuple[str, ...]:
    from evohpo.evolve.names import STRATEGY_NAMES

    return STRATEGY_NAMES


def _runtimes() -> tuple[str, ...]:
    from evohpo.runtime.names import RUNTIME_NAMES

    return RUNTIME_NAMES


# config key -> the names its registry holds
CHOICES: dict[str, Callable[[], tuple[str, ...]]] = {
    "algo.name": _algos,
    "evolution.strategy": _strategies,
    "distributed.backend": _runtimes,
}


def one_of(names: tuple[str, ...]) -> str:
    """``'a', 'b'``: the names as a choice key's error lists them."""
    return ", ".join(repr(n) for n in names)
