"""Which runtime a config asks for (``distributed.backend``): ``RUNTIMES`` maps each name to a
loader of its runtime class (Ray imported only when asked for)."""

from __future__ import annotations

from collections.abc import Callable

from evohpo.config import Config
from evohpo.runtime import Runtime
from evohpo.runtime.names import RUNTIME_NAMES


def _local(cfg: Config) -> type[Runtime]:
    from evohpo.runtime.local import LocalRuntime

    return LocalRuntime


def _ray(cfg: Config) -> type[Runtime]:
    from evohpo.runtime.ray import check_address, require_ray

    require_ray()
    check_address(cfg.distributed.address)
    from evohpo.runtime.ray.driver import RayRuntime

    return RayRuntime


RUNTIMES: dict[str, Callable[[Config], type[Runtime]]] = {"local": _local, "ray": _ray}
assert tuple(RUNTIMES) == RUNTIME_NAMES, "evohpo.runtime.names lists the runtimes' names"


def runtime_class(cfg: Config) -> type[Runtime]:
    """The runtime for ``distributed.backend`` (Ray and the cluster's address checked first, so
    that a bad one is refused before a run directory appears)."""
    return RUNTIMES[cfg.distributed.backend](cfg)
