"""A lost Ray actor, recreated: its members from the driver's copy, its replay copy from a live
actor (else the last checkpoint), fresh envs (the :class:`~evohpo.runtime.ray.driver.RayRuntime`'s
fault handling)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol

import numpy as np

from evohpo import checkpoint
from evohpo.config import Config
from evohpo.evolve.lineage import MutationRecord
from evohpo.evolve.member import Member
from evohpo.logs.loggers import Logger
from evohpo.runtime.ray import ActorLost


class Driver(Protocol):
    """What recovering an actor needs of the Ray runtime's driver."""

    ray: ModuleType
    cfg: Config
    log: Logger
    run_dir: Path | None
    actors: list[Any]
    num_actors: int
    envs_per_actor: int
    actor_restarts: int
    pool_seed: int
    generation: int
    members: list[Member]
    placed: list[Member | None]
    timing: dict[str, float]
    obs: dict[str, np.ndarray] | None
    done: np.ndarray
    ep_return: np.ndarray

    def spawn(self, g: int) -> Any: ...
    def get(self, ref: Any) -> Any: ...
    def held(self, g: int) -> list[int]: ...
    def places(self, g: int) -> range: ...
    def member_state(self, m: Member) -> dict[str, Any]: ...
    def sync_opponents(self, only: Sequence[int] | None = None) -> None: ...


def first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0][:160] if text else type(e).__name__


def recover(rt: Driver, g: int, error: BaseException) -> None:
    """Recreate lost actor ``g``: its members from the driver's copy, its replay copy from a
    live actor (else the checkpoint), fresh envs. Each member gets a ``restored`` record."""
    t0 = time.perf_counter()
    rt.actor_restarts += 1
    limit = rt.cfg.distributed.max_actor_restarts
    why = first_line(error)
    if rt.actor_restarts > limit:
        raise ActorLost(f"ray actor {g} was lost ({why}); {rt.actor_restarts} actors lost "
                        f"(distributed.max_actor_restarts is {limit}); stopping. "
                        f"{checkpoint.kept(rt.run_dir)}") from None
    rt.log.message(f"ray: actor {g} was lost ({why}); recreating it and restoring its "
                   f"members ({rt.actor_restarts}/{limit})")
    with contextlib.suppress(Exception):
        rt.ray.kill(rt.actors[g])
    rt.actors[g] = rt.spawn(g)
    for p in rt.places(g):
        rt.placed[p] = None  # sent again below
    sync_members_of(rt, g)
    restore_replay(rt, g)
    e = slice(g * rt.envs_per_actor, (g + 1) * rt.envs_per_actor)
    seed = int(np.random.SeedSequence([rt.pool_seed, 1_000 + rt.actor_restarts])
               .generate_state(1)[0])
    obs = rt.get(rt.actors[g].reset.remote(seed))
    if rt.obs is not None:
        for a, o in obs.items():
            rt.obs[a][e] = o
    rt.ep_return[e] = 0.0  # the cut episodes are not counted as returns
    rt.done[e] = True      # and exploration noise restarts with the new episodes
    rt.get(rt.actors[g].set_loop.remote(rt.done[e], rt.ep_return[e]))
    records = [MutationRecord(rt.generation, m.id, m.parent_id, "restored", op=f"actor {g}",
                              note=f"actor lost ({why}); restored from the driver's copy "
                                   "(the last checkpoint's state); this window's progress "
                                   "of the member is lost")
               for m in (rt.members[j] for j in rt.held(g))]
    rt.log.lineage([r.to_json() for r in records])
    rt.timing["recover"] += time.perf_counter() - t0


def sync_members_of(rt: Driver, g: int) -> None:
    held = rt.held(g)
    rt.get(rt.actors[g].set_members.remote(
        {i: rt.member_state(rt.members[j]) for i, j in enumerate(held)}))
    for p, j in zip(rt.places(g), held, strict=True):
        rt.placed[p] = rt.members[j]
    rt.sync_opponents(only=[g])


def restore_replay(rt: Driver, g: int) -> None:
    """Fill a recreated actor's replay copy from a live actor's, else from the last
    checkpoint."""
    for h in range(rt.num_actors):
        if h == g:
            continue
        try:  # the state goes actor to actor; the driver only passes the reference
            rt.get(rt.actors[g].load_buffer.remote(rt.actors[h].buffer_state.remote()))
            return
        except rt.ray.exceptions.RayError:
            continue  # that one is lost too: it is recovered when next called
    path = rt.run_dir / "checkpoints" / "latest.pt" if rt.run_dir else None
    if path is not None and path.is_file():
        meta, tensors = checkpoint.load(path)
        if meta.get("has_buffer"):
            rt.get(rt.actors[g].load_buffer.remote(checkpoint.numpify(tensors["buffer"])))
            return
    rt.log.message(f"ray: no copy of the replay memory survived for actor {g}; it refills")
