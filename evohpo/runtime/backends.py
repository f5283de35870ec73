"""Which runtime a config asks for (``distributed.backend``)."""

from __future__ import annotations

from evohpo.config import Config
from evohpo.runtime import Runtime


def runtime_class(cfg: Config) -> type[Runtime]:
    """The runtime for ``distributed.backend``: local, or Ray (Ray and the cluster's address
    checked first, so that a bad one is refused before a run directory appears)."""
    if cfg.distributed.backend == "ray":
        from evohpo.runtime.ray import check_address, require_ray

        require_ray()
        check_address(cfg.distributed.address)
        from evohpo.runtime.ray.driver import RayRuntime

        return RayRuntime
    from evohpo.runtime.local import LocalRuntime

    return LocalRuntime
