"""The Ray runtime: the members' work done in actors, the books kept by the driver.

``RayRuntime`` is the second :class:`~evohpo.runtime.Runtime`: the trainer's loop, selection,
mutation, logging and checkpoints are the same as a local run's. It collects a window (or what
is left of the budget) in every actor at once, then shares the new experience; evaluates in the
actors in parallel; and saves and restores the actors' envs and replay copies in the local
checkpoint format. A checkpoint of either runtime resumes on the other.

Slots are laid out as in a local run: actor ``g`` holds member slots ``g*m .. (g+1)*m - 1``
(``m = population.size / num_actors``) and envs ``g*e .. (g+1)*e - 1`` of the pool, each env
seeded as the local pool seeds it. With one actor, a Ray run repeats a local run exactly.

Faults: an actor that dies (its process, or its node) is recreated; its members come back from
the driver's copy (their state at the last window end, which is what the last checkpoint holds),
its replay copy from a live actor (or the checkpoint), its envs start fresh episodes. What it did
since that window end is lost; each restored member gets a lineage record (kind ``restored``).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from evohpo import config as C
from evohpo.algos.buffer import ReplayBuffer
from evohpo.algos.registry import on_policy
from evohpo.envs.spec import EnvSpec
from evohpo.errors import EvohpoError
from evohpo.evolve.member import Member
from evohpo.logs.loggers import Logger
from evohpo.runtime import Runtime
from evohpo.runtime.evaluate import Score
from evohpo.runtime.memory import describe_sharing
from evohpo.runtime.phases import DRIVER_PHASES, Phases
from evohpo.runtime.ray import connect, group, recovery, require_ray, resolve_resources
from evohpo.runtime.ray.books import take_members, writable
from evohpo.runtime.ray.group import MemberGroup, group_config, member_state
from evohpo.runtime.ray.recovery import first_line


class RayRuntime(Runtime):
    def __init__(self, cfg: C.Config, spec: EnvSpec, log: Logger, pool_seed: int,
                 fitness_agents: list[str], run_dir: Path | None = None):
        self.ray = require_ray()
        d = cfg.distributed
        super().__init__(cfg, spec, log, pool_seed, fitness_agents, run_dir)
        self.phases = Phases(DRIVER_PHASES)  # the driver's own: the actors' windows are collect
        self.device = torch.device("cpu")  # the driver only selects, mutates and saves members
        self.on_policy = on_policy(cfg)  # members learn from rollouts of their own
        self.owns_ray = connect(d.address)
        self.actors: list[Any] = []
        try:
            self.num_actors, self.gpus = resolve_resources(cfg, self.ray.cluster_resources())
            self.per_actor = cfg.population.size // self.num_actors
            self.envs_per_actor = cfg.env.num_envs // self.num_actors
            self.group_cfg = C.to_dict(group_config(cfg, self.num_actors, self.gpus))
            self.actor_restarts = 0
            self.generation = 0  # of the window being collected (for lineage records)
            # the member each actor holds in each of its places (actor-major)
            self.placed: list[Member | None] = [None] * self.size
            self.timing = {"collect": 0.0, "share": 0.0, "sync": 0.0, "evaluate": 0.0,
                           "recover": 0.0}
            self.shared_bytes = 0
            self.device_gens: dict[int, Any] = {}  # members' torch generator states on GPU actors
            self.sent_opponents: list[tuple[int, Any]] | None = None  # the placing they hold
            self.actors = [self.spawn(g) for g in range(self.num_actors)]
            self.infos = self.ray.get([a.info.remote() for a in self.actors])
        except BaseException:
            self.stop_actors()
            raise

    # ----------------------------------------------------------------------------- actors
    def spawn(self, g: int) -> Any:
        d = self.cfg.distributed
        cls = self.ray.remote(MemberGroup).options(
            num_cpus=d.cpus_per_actor, num_gpus=self.gpus, max_restarts=0,
            scheduling_strategy="SPREAD")  # one actor per node before two on one
        return cls.remote(self.group_cfg, g)

    def held(self, g: int) -> list[int]:
        """The members actor ``g`` holds, in its own order: those of its slots; on a game of
        several teams, each team's members of its slots, team after team."""
        own = range(g * self.per_actor, (g + 1) * self.per_actor)
        if self.slots is None:
            return list(own)
        return [self.slots[j][t] for t in range(len(self.slots[0])) for j in own]

    def places(self, g: int) -> range:
        """Actor ``g``'s entries in ``placed``."""
        k = self.size // self.num_actors
        return range(g * k, (g + 1) * k)

    def stop_actors(self) -> None:
        for a in self.actors:
            with contextlib.suppress(Exception):
                self.ray.kill(a)
        self.actors = []
        if getattr(self, "owns_ray", False):
            self.owns_ray = False
            self.ray.shutdown()

    def call_all(self, method: str, args: Callable[[int], tuple[Any, ...]] = lambda g: (),
                 only: Sequence[int] | None = None) -> list[Any]:
        """Call ``method`` on every actor (or ``only`` these) at once; a lost actor is recovered
        and asked again. An evohpo error raised in an actor is raised here as it is."""
        groups = list(range(self.num_actors)) if only is None else list(only)
        out: dict[int, Any] = {}
        while groups:
            refs = {g: getattr(self.actors[g], method).remote(*args(g)) for g in groups}
            groups = []
            for g, ref in refs.items():
                try:
                    out[g] = self.get(ref)
                except self.ray.exceptions.RayActorError as e:
                    self.recover(g, e)
                    groups.append(g)
        return [out[g] for g in sorted(out)]

    def get(self, ref: Any) -> Any:
        try:
            return self.ray.get(ref)
        except self.ray.exceptions.RayTaskError as e:
            if isinstance(e.cause, EvohpoError):  # one clear line, not a remote traceback
                raise e.cause from None
            raise

    # ----------------------------------------------------------------------------- the loop
    def start(self) -> None:
        d, n = self.cfg.distributed, self.num_actors
        hosts = sorted({i["host"] for i in self.infos})
        self.log.message(f"ray: {n} actor(s) x {self.per_actor} member(s), {self.envs_per_actor} "
                         f"env(s) each, on {len(hosts)} node(s); {d.cpus_per_actor:g} CPUs"
                         f"{f', {self.gpus:g} GPUs' if self.gpus else ''} per actor, "
                         f"members on {self.infos[0]['device']}")
        if not self.on_policy:  # on-policy members learn from their own rollouts: nothing shared
            self.log.message(describe_sharing(self.cfg, self.row_bytes, n))
        self.push_loop()
        if self.obs is None:  # a restored runtime has its envs back already
            self.reset_envs(self.pool_seed)

    @property
    def row_bytes(self) -> int:
        return ReplayBuffer.bytes_for(self.spec, 1, self.next_actions)

    def collect(self, n: int, env_steps: int, generation: int,
                stop: Callable[[], bool] = lambda: False) -> int:
        """Every actor runs ``n`` vector steps (a window is never cut), then the experience is
        shared."""
        self.generation = generation
        self.sync_members()
        t0 = time.perf_counter()
        calls = self.dispatch(n, env_steps)
        reports: list[Any] = []
        for report_ref, _ in calls:
            try:
                reports.append(self.get(report_ref))
            except self.ray.exceptions.RayActorError as e:
                reports.append(e)
        t1 = time.perf_counter()
        for g, r in enumerate(reports):
            if not isinstance(r, Exception):
                self.absorb(g, r)
        lost = {g: r for g, r in enumerate(reports) if isinstance(r, Exception)}
        live = [g for g in range(len(calls)) if g not in lost]
        if not self.on_policy:
            with self.phases("store"):
                self.share([calls[g][1] for g in live], live)
        self.timing["collect"] += t1 - t0
        self.timing["share"] += time.perf_counter() - t1
        for g, err in lost.items():
            self.recover(g, err)
        self.log.progress(env_steps + n * self.cfg.env.num_envs, {})
        return n

    def dispatch(self, n: int, env_steps: int) -> list[Any]:
        """Start ``n`` vector steps in every actor: one (report, rows) pair of references each."""
        share = env_steps // self.num_actors
        self.restarts_before = self.restarts
        return [a.run.options(num_returns=2).remote(n, share, self.restarts,
                                                    self.session_restarts)
                for a in self.actors]

    def finish_window(self) -> None:
        """On-policy members learn on the rollouts their actors hold; the driver takes their
        states back."""
        if self.on_policy:
            for g, report in enumerate(self.call_all("finish")):
                self.absorb_members(g, report)

    def absorb(self, g: int, report: dict[str, Any]) -> None:
        """Take an actor's window into the driver's books: its members' states and its
        statistics."""
        self.absorb_members(g, report)
        self.train_returns.extend(report["train_returns"])
        self.dropped += report["dropped"]
        new = report["restarts"] - self.restarts_before
        self.restarts, self.session_restarts = self.restarts + new, self.session_restarts + new
        e = slice(g * self.envs_per_actor, (g + 1) * self.envs_per_actor)
        assert self.obs is not None, "train() resets the envs before the first window"
        for a, o in report["obs"].items():
            self.obs[a][e] = o
        self.done[e], self.ep_return[e] = report["done"], report["ep_return"]

    def absorb_members(self, g: int, report: dict[str, Any]) -> None:
        take_members(self, g, report)

    def share(self, rows: list[Any], live: list[int]) -> None:
        """Every live actor appends the other live actors' new rows (actor to actor, by
        reference)."""
        if len(live) < 2:
            return
        refs = {g: self.actors[g].receive.remote(*[r for h, r in zip(live, rows, strict=True)
                                                   if h != g])
                for g in live}
        for g, ref in refs.items():
            try:
                self.shared_bytes += self.get(ref) * self.row_bytes
            except self.ray.exceptions.RayActorError as e:
                self.recover(g, e)
            except self.ray.exceptions.RayError as e:
                # rows lost with a node: this window's share of them
                self.log.message(f"ray: actor {g} lacks some of this window's experience "
                                 f"({first_line(e)})")

    # ------------------------------------------------------------------------- members and state
    def sync_members(self) -> None:
        """Send every slot whose member changed (a clone, a moved elite, a resumed run) to its
        actor."""
        changes = {g: {i: self.member_state(self.members[j])
                       for i, (j, p) in enumerate(zip(self.held(g), self.places(g), strict=True))
                       if self.members[j] is not self.placed[p]}
                   for g in range(self.num_actors)}
        changes = {g: c for g, c in changes.items() if c}
        if changes:
            t0 = time.perf_counter()
            self.call_all("set_members", lambda g: (changes[g],), only=list(changes))
            self.timing["sync"] += time.perf_counter() - t0
        self.placed = [self.members[j] for g in range(self.num_actors) for j in self.held(g)]
        self.sync_opponents()
        alive = {m.id for m in self.members}
        self.device_gens = {i: st for i, st in self.device_gens.items() if i in alive}

    def member_state(self, m: Member) -> dict[str, Any]:
        st = member_state(m)
        if m.id in self.device_gens:  # its stream continues on the actor's device
            st["algo"]["gen"] = self.device_gens[m.id]
        return st

    def push_loop(self) -> None:
        """The per-env loop state (episode done, return so far) to the actors (a resumed run's)."""
        e = self.envs_per_actor
        self.call_all("set_loop", lambda g: (self.done[g * e:(g + 1) * e],
                                             self.ep_return[g * e:(g + 1) * e]))

    def evaluate(self, seed: int) -> list[Score]:
        """Every actor evaluates its members at once, on episodes of the same seed."""
        self.sync_members()
        t0 = time.perf_counter()
        results = [r for part in self.call_all("evaluate", lambda g: (seed,)) for r in part]
        self.timing["evaluate"] += time.perf_counter() - t0
        for m, (_, diverged, why) in zip(self.members, results, strict=True):
            if diverged:
                self.mark_diverged(m, why)
        return [sc for sc, _, _ in results]

    def play(self, matches: list[list[Member]], seed: int) -> list[dict[str, np.ndarray]]:
        """The matches spread over the actors (match k on actor k mod actors), played at once;
        each actor gets the states of the members its matches need."""
        t0 = time.perf_counter()
        mine = [list(range(g, len(matches), self.num_actors)) for g in range(self.num_actors)]
        busy = [g for g in range(self.num_actors) if mine[g]]

        def args(g: int) -> tuple[Any, ...]:
            need = {m.id: m for k in mine[g] for m in matches[k]}
            return ({i: self.member_state(m)["algo"] for i, m in need.items()},
                    [[m.id for m in matches[k]] for k in mine[g]], seed)

        parts = self.call_all("play", args, only=busy) if busy else []
        out: list[dict[str, np.ndarray]] = [{} for _ in matches]
        for g, part in zip(busy, parts, strict=True):
            for k, returns in zip(mine[g], part, strict=True):
                out[k] = returns
        self.timing["evaluate"] += time.perf_counter() - t0
        return out

    # ----------------------------------------------------------------------------- state
    def reset_envs(self, seed: int | None) -> dict[str, np.ndarray]:
        e = self.envs_per_actor  # env i of the pool gets seed + i, as in a local pool
        self.obs = self._obs(self.call_all("reset",
                                           lambda g: (None if seed is None else seed + g * e,)))
        return self.obs

    def pool_states(self) -> list[dict[str, Any]]:
        return [writable(st) for part in self.call_all("pool_state") for st in part]

    def set_pool_states(self, states: Sequence[dict[str, Any]]) -> dict[str, np.ndarray]:
        e = self.envs_per_actor
        self.obs = self._obs(self.call_all("set_pool_state",
                                           lambda g: (list(states[g * e:(g + 1) * e]),)))
        return self.obs

    def _obs(self, parts: Sequence[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
        return {a: np.concatenate([p[a] for p in parts]) for a in self.spec.agents}

    def buffer_state(self) -> dict[str, Any]:
        """Actor 0's copy (the others hold the same rows, in another order within each window);
        on-policy: every actor's rollouts."""
        if self.on_policy:
            return {"groups": writable(self.call_all("buffer_state"))}
        return writable(self.call_all("buffer_state", only=[0])[0])

    def load_buffer(self, state: dict[str, Any]) -> None:
        if self.on_policy:
            self.call_all("load_buffer", lambda g: (state["groups"][g],))
            return
        ref = self.ray.put(state)  # stored once, read by every actor
        self.call_all("load_buffer", lambda g: (ref,))

    # ----------------------------------------------------------------------------- faults
    def recover(self, g: int, error: BaseException) -> None:
        recovery.recover(self, g, error)

    def sync_opponents(self, only: Sequence[int] | None = None) -> None:
        """Send each actor its slots' opponents when they were placed anew (a new window),
        or to ``only`` these actors (recreated ones)."""
        ops, m = self.opponents, self.per_actor
        if ops is not self.sent_opponents or only is not None:
            self.sent_opponents = ops
            self.call_all("set_opponents", lambda g: (None if ops is None else [
                (u, group.opponent_state(a)) for u, a in ops[g * m:(g + 1) * m]],), only=only)

    # ----------------------------------------------------------------------------- end
    def summary(self) -> dict[str, Any]:
        return {"actors": self.num_actors, "actor_restarts": self.actor_restarts,
                "shared_bytes": self.shared_bytes, "timing": dict(self.timing)}

    def close(self) -> None:
        with contextlib.suppress(Exception):  # let the actors close their envs, then stop them
            self.ray.get([a.close.remote() for a in self.actors], timeout=30)
        self.stop_actors()
