"""The population on a Ray cluster (``distributed.backend: ray``).

What runs where:

* **Actors** (:class:`~evohpo.runtime.ray.group.MemberGroup`, one per ``distributed.num_actors``):
  each holds ``population.size / num_actors`` member slots, its share of ``env.num_envs`` envs,
  and its own copy of the replay memory. It runs the local trainer's loop for its members
  (act -> step_async -> learn -> step_wait -> store) for a whole evolution window, and
  evaluates its members on its own evaluation envs. Actors ask Ray for
  ``distributed.cpus_per_actor`` CPUs and ``distributed.gpus_per_actor`` GPUs (a fraction
  shares a GPU between actors; null shares the cluster's GPUs evenly).
* **The driver** runs the trainer's own loop with the Ray runtime
  (:class:`~evohpo.runtime.ray.driver.RayRuntime`) in place of the local one, and keeps the
  books: evaluation seeds, selection and mutation, logging, lineage and checkpoints (the local
  format). Weights, optimizer
  state and random generators travel as state dicts through Ray's object store.
* **Experience** is shared every window: each actor returns the transitions it stored in the
  window as one block of rows, and every other actor appends them to its replay copy. The rows
  go actor to actor through the object store (the driver only passes references), so a window
  moves ``transitions x bytes per transition x (actors - 1)`` bytes.

Ray is an optional extra: ``pip install 'evohpo[ray]'``.
"""

from __future__ import annotations

import math
import os
import socket
from types import ModuleType
from typing import Any

from evohpo.config import Config
from evohpo.devices import wants_gpu
from evohpo.errors import ConfigError, EvohpoError

INSTALL = "Ray is not installed; pip install 'evohpo[ray]'"


class ActorLost(EvohpoError):
    """Ray actors were lost more often than ``distributed.max_actor_restarts`` allows."""

    exit_code = 1


def require_ray() -> ModuleType:
    """The ray module, or a ConfigError saying how to install it."""
    try:
        import ray
    except ImportError:
        raise ConfigError("config key 'distributed.backend': 'ray' asked for, but "
                          f"{INSTALL}") from None
    return ray


def connect(address: str | None) -> bool:
    """Connect to the Ray cluster at ``address`` (None: start a local instance) unless connected.

    Returns whether this call started the connection (and so should end it).
    """
    ray = require_ray()
    if ray.is_initialized():
        return False
    kwargs: dict[str, Any] = {"address": address, "logging_level": "warning"}
    if address is None and not os.environ.get("RAY_ADDRESS"):
        # a local instance for one run: no web UI, and no notes about cluster set-up
        kwargs.update(include_dashboard=False, logging_level="error")
    check_address(address)
    try:
        ray.init(**kwargs)
    except ConnectionError as e:
        raise ConfigError("config key 'distributed.address': cannot connect to a Ray cluster at "
                          f"{address!r} ({e}); start one with `ray start --head`, or leave the "
                          "address null for a local instance") from None
    return True


def check_address(address: str | None) -> None:
    """A ConfigError now if nothing listens at ``address`` (ray.init would retry for minutes)."""
    if address and reachable(address) is False:
        raise ConfigError(f"config key 'distributed.address': nothing answers at {address!r}; "
                          "start the head node with `ray start --head` and pass the address it "
                          "prints, or leave the address null for a local instance")


def reachable(address: str, timeout: float = 5.0) -> bool | None:
    """Whether a TCP connection to HOST:PORT opens (None: not a HOST:PORT address, e.g. 'auto')."""
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit() or "://" in address:
        return None
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
            return True
    except OSError:
        return False


def resolve_resources(cfg: Config, resources: dict[str, float]) -> tuple[int, float]:
    """(actors, GPUs per actor) for the cluster's ``resources`` (``ray.cluster_resources()``).

    Actors: ``distributed.num_actors``, or (0) the most that fit and divide the population.
    GPUs: ``distributed.gpus_per_actor``, or (null) the cluster's GPUs shared evenly by the
    actors, at most one each, where the run wants one (:func:`evohpo.devices.wants_gpu`:
    ``cuda``, or ``auto`` with networks large enough to gain from it).
    """
    d = cfg.distributed
    cpus, gpus = resources.get("CPU", 0.0), resources.get("GPU", 0.0)
    ask = d.gpus_per_actor or 0.0

    def fits(n: int) -> bool:
        return n * d.cpus_per_actor <= cpus + 1e-9 and n * ask <= gpus + 1e-9

    have = f"the Ray cluster ({cpus:g} CPUs, {gpus:g} GPUs)"
    if d.num_actors:
        if not fits(d.num_actors):
            raise ConfigError(
                f"config key 'distributed.num_actors': {d.num_actors} actors x "
                f"{d.cpus_per_actor:g} CPUs{f' x {ask:g} GPUs' if ask else ''} do not fit "
                f"{have}; lower distributed.num_actors, distributed.cpus_per_actor or "
                "distributed.gpus_per_actor, or add nodes")
        n = d.num_actors
    else:
        fitting = [k for k in range(1, cfg.population.size + 1)
                   if cfg.population.size % k == 0 and fits(k)]
        if not fitting:
            raise ConfigError("config key 'distributed.cpus_per_actor': one actor "
                              f"({d.cpus_per_actor:g} CPUs, {ask:g} GPUs) does not fit {have}")
        n = max(fitting)
    if d.gpus_per_actor is None:  # Ray takes fractions in steps of 0.0001
        ask = (math.floor(min(1.0, gpus / n) * 10_000) / 10_000
               if gpus and wants_gpu(cfg) else 0.0)
    if cfg.device.startswith("cuda") and ask == 0:
        raise ConfigError(f"config key 'device': {cfg.device!r}, but {have} gives the actors no GPU"
                          f"{'; set distributed.gpus_per_actor (e.g. 0.5)' if gpus else ''}")
    return n, ask


__all__ = ["INSTALL", "ActorLost", "check_address", "connect", "require_ray", "resolve_resources"]
