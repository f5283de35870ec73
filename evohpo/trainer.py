"""The training loop: collect -> store -> learn -> every window evaluate -> select -> mutate -> log.

How members share the pool: the pool's ``num_envs`` envs are split into equal, fixed slices, one
per member slot. Every vector step, each member picks actions for its own slice, all actions go
out in one ``step_async`` and every env advances at once. So every worker is busy on every step,
all members collect at the same rate (each member's ``evo_steps`` window ends on the same step),
and no episode is ever cut short at a window boundary: a member's replacement simply takes over
its slot's envs. Learning runs between ``step_async`` and ``step_wait``, overlapping the envs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch

from evohpo import checkpoint, evolution
from evohpo.algos.acting import PopulationActor
from evohpo.buffer import ReplayBuffer, human_bytes
from evohpo.config import Config, to_dict
from evohpo.envs import VectorPool, make_pool, probe
from evohpo.envs.pool import StepResult
from evohpo.errors import ConfigError, Diverged, EnvError, Interrupted
from evohpo.loggers import Logger
from evohpo.population import Member, child_seed, make_population


def available_memory() -> int | None:
    """Bytes of memory available to new allocations (Linux MemAvailable), or None if unknown."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def check_memory(spec: Any, capacity: int) -> None:
    """Refuse a replay memory that cannot fit: numpy would allocate lazily and fail much later."""
    need = ReplayBuffer.bytes_for(spec, capacity)
    have = available_memory()
    if have is not None and need > 0.9 * have:
        raise ConfigError(f"config key 'buffer.capacity': {capacity:,} transitions need {human_bytes(need)} "
                          f"but only {human_bytes(have)} of memory is available; lower buffer.capacity")


def nonfinite_weights(algo: Any) -> str | None:
    """Where the first NaN/inf weight of a member's actors or critics is, or None."""
    nets = [(f"{a} actor", n) for a, n in algo.actors.items()]
    nets += [(f"{a} critic {i}", c) for a, cs in algo.critics.items() for i, c in enumerate(cs)]
    for where, net in nets:
        for name, p in net.named_parameters():
            if not bool(torch.isfinite(p).all()):
                return f"{where} {name}"
    return None


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dev = torch.device(name)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"config key 'device': {name!r} asked for, but no CUDA device is available; "
                          "use 'auto' or 'cpu'")
    return dev


def torch_threads(cfg: Config) -> int:
    """Intra-op threads for torch: what the config says, else one.

    The networks are small (batches of a few hundred rows through 64-wide MLPs): a second thread
    buys nothing, while torch's OpenMP threads spin as they wait and starve env workers or other
    processes on the same cores (measured on 2 cores: 570 instead of 5,100 env steps/s).
    """
    return cfg.torch_threads or 1


def episode_returns(algo: Any, pool: VectorPool, seed: int,
                    on_step: Any = None) -> dict[str, np.ndarray]:
    """Each env of ``pool`` plays one complete episode with the deterministic policy.

    Returns every agent's episode return per env. Steps after an env's first episode ends are
    not counted; ``on_step`` (if given) is called after every step (for rendering).
    """
    n = pool.num_envs
    obs = pool.reset(seed=seed)
    returns = {a: np.zeros(n) for a in pool.spec.agents}
    finished = np.zeros(n, bool)
    for _ in range(100_000):
        actions, _ = algo.act(obs, None)
        res = pool.step(actions)
        for a in pool.spec.agents:
            returns[a] += np.where(finished, 0.0, res.rewards[a])
        finished |= res.done
        obs = res.obs
        if on_step is not None:
            on_step()
        if finished.all():
            return returns
    raise EnvError(f"env {pool.spec.name!r}: an evaluation episode did not end in 100,000 steps; "
                   "evohpo needs episodes that end (set max_cycles in env.kwargs)")


class Trainer:
    def __init__(self, cfg: Config, logger: Logger | None = None, run_dir: Path | None = None):
        self.cfg = cfg
        self.run_dir = run_dir
        self.obs: dict[str, np.ndarray] | None = None
        self.interrupted = False
        self.log = logger or Logger()
        self.device = resolve_device(cfg.device)
        torch.set_num_threads(torch_threads(cfg))
        pool_ss, eval_ss, evo_ss, pop_ss = np.random.SeedSequence(cfg.seed).spawn(4)
        self.pool_seed = int(pool_ss.generate_state(1)[0])
        self.eval_rng = np.random.default_rng(eval_ss)
        self.evo_rng = np.random.default_rng(evo_ss)
        e = cfg.env
        self.spec = probe(e.name, e.kwargs)
        self.fitness_agents = self._fitness_agents()
        self.pool: VectorPool = self.make_train_pool()
        # the same backend as training: a batched pool plays the episodes a PettingZoo pool would
        self.eval_pool = make_pool(e.name, e.kwargs, cfg.eval.episodes, "sync", self.spec, backend=e.backend)
        check_memory(self.spec, cfg.buffer.capacity)
        self.buffer = ReplayBuffer(self.spec, cfg.buffer.capacity, self.device)
        self.members = make_population(cfg, self.spec, np.random.default_rng(pop_ss), self.device)
        self.actor = PopulationActor(self.spec)
        self.k = e.num_envs // cfg.population.size  # envs per member slot
        b = cfg.mutation.bounds
        self.mutation_cfg = dataclasses.replace(cfg.mutation, bounds=dataclasses.replace(
            b, batch_size=dataclasses.replace(b.batch_size, max=min(b.batch_size.max, cfg.buffer.capacity))))
        self.next_id = cfg.population.size
        self.generation = 0
        self.env_steps = 0        # population env steps so far
        self.window_steps = 0     # env steps each member collected in this window
        self.best_ever = -np.inf
        self.done = np.zeros(e.num_envs, bool)
        self.ep_return = np.zeros(e.num_envs)
        self.restarts = 0         # env pool restarts after failures
        self.dropped = 0          # non-finite transitions kept out of the replay memory
        self.elapsed_before = 0.0  # wall seconds the run spent before it was resumed
        self.start = time.perf_counter()
        self._reset_window_stats()

    def _fitness_agents(self) -> list[str]:
        chosen = self.cfg.eval.fitness_agents
        if chosen is None:
            return list(self.spec.agents)
        unknown = [a for a in chosen if a not in self.spec.agents]
        if unknown or not chosen:
            raise ConfigError(f"config key 'eval.fitness_agents': {chosen} must name agents of "
                              f"{self.spec.name}: {', '.join(self.spec.agents)}")
        return list(chosen)

    # ----------------------------------------------------------------------------- the loop
    def train(self) -> dict[str, Any]:
        cfg = self.cfg
        self.log.message(f"env {self.spec.name}: {self.spec.describe()}")
        self.log.message(f"replay memory: {cfg.buffer.capacity:,} transitions, "
                         f"{human_bytes(self.buffer.nbytes)} preallocated")
        self.start = self.window_start = time.perf_counter()
        if self.obs is None:  # a resumed run has its envs and observations back already
            self.obs = self.pool.reset(seed=self.pool_seed)
        with self.interrupts():
            while True:
                # the checks come before the step: a checkpoint is always taken here, so a
                # resumed run re-enters the loop exactly where the saved one left it
                if self.interrupted:
                    self.stop_on_interrupt()
                if self.env_steps >= cfg.steps:
                    # checkpoint first: a resumed run with a larger budget redoes this evaluation
                    self.save_checkpoint()
                    fitness = self.evaluate_population()
                    self.save_best(fitness)
                    self.log_generation(fitness, [])
                    break
                if self.window_steps >= cfg.evolution.evo_steps:
                    fitness = self.evaluate_population()
                    self.save_best(fitness)
                    stop = self.target_reached(fitness)
                    records = [] if stop else self.evolve(fitness)
                    self.log_generation(fitness, records)
                    self.save_checkpoint()
                    if stop:
                        break
                self.step()
        return self.summary()

    def step(self) -> None:
        """One vector step: act, dispatch, learn while the envs run, store."""
        obs = self.obs
        assert obs is not None, "train() resets the pool before stepping"
        env_actions, stored = self.act(obs)
        try:
            self.pool.step_async(env_actions)
            self.learn()  # overlaps the envs' step; sees the buffer as of the previous step
            res = self.pool.step_wait()
        except EnvError as e:
            self.restart_pool(e)  # this step's transitions are lost, never stored as if complete
            return
        self.dropped += self.buffer.add(obs, stored, res.rewards, res.next_obs, res.terminated, res.alive)
        self.track_episodes(res)
        self.obs = res.obs
        self.count_steps()

    def restart_pool(self, error: EnvError) -> None:
        """Replace a failed pool with fresh envs; after ``env.max_restarts`` failures, stop."""
        self.restarts += 1
        limit = self.cfg.env.max_restarts
        if self.restarts > limit:
            raise EnvError(f"{error} -- the env pool failed {self.restarts} times (env.max_restarts is "
                           f"{limit}); stopping. The last checkpoint is kept.") from None
        self.log.message(f"{error}; restarting the env pool with fresh envs ({self.restarts}/{limit})")
        with contextlib.suppress(Exception):
            self.pool.close()
        self.pool = self.make_train_pool()
        seed = int(np.random.SeedSequence([self.pool_seed, self.restarts]).generate_state(1)[0])
        self.obs = self.pool.reset(seed=seed)
        self.ep_return[:] = 0.0  # the cut episodes are not counted as returns
        self.done[:] = True      # and exploration noise restarts with the new episodes

    def make_train_pool(self) -> VectorPool:
        e = self.cfg.env
        return make_pool(e.name, e.kwargs, e.num_envs, e.pool, self.spec, e.workers, e.worker_timeout, e.backend)

    # ----------------------------------------------------------------------------- checkpoints
    def save_checkpoint(self) -> None:
        if self.run_dir is None or not self.cfg.checkpoint.enabled:
            return
        meta, tensors = checkpoint.trainer_state(self, with_buffer=self.cfg.checkpoint.buffer)
        try:
            checkpoint.save(self.run_dir / "checkpoints" / "latest.pt", meta, tensors)
        except checkpoint.CheckpointError as e:  # e.g. a full disk: keep training, try again next time
            self.log.message(f"warning: {e}")

    def save_best(self, fitness: list[float]) -> None:
        """Keep the best member ever seen (its networks and record) in checkpoints/best.pt."""
        best = int(np.argmax(np.where(np.isnan(fitness), -np.inf, fitness)))
        if self.run_dir is None or not self.cfg.checkpoint.enabled or not fitness[best] > self.best_ever:
            return
        m = self.evaluated[best]
        meta = {"config": to_dict(self.cfg), "generation": self.generation, "env_steps": self.env_steps,
                "member": {"id": m.id, "parent_id": m.parent_id, "fitness": fitness[best],
                           "per_agent": self.eval_returns[best], "eval_seed": self.eval_seed,
                           "hyperparams": dataclasses.asdict(m.hp), "arch": m.algo.arch()}}
        try:
            checkpoint.save(self.run_dir / "checkpoints" / "best.pt", meta, {"algo": m.algo.state_dict()})
        except checkpoint.CheckpointError as e:
            self.log.message(f"warning: {e}")

    @contextlib.contextmanager
    def interrupts(self) -> Iterator[None]:
        """First Ctrl-C or SIGTERM: finish the step, checkpoint, exit cleanly. Second: stop now."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return

        def handler(signum: int, frame: Any) -> None:
            if self.interrupted:
                raise KeyboardInterrupt
            self.interrupted = True
            how = "interrupted" if signum == signal.SIGINT else signal.Signals(signum).name
            self.log.message(f"{how}: saving a checkpoint (Ctrl-C again to stop at once)")

        old = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield
        finally:
            for s, h in old.items():
                signal.signal(s, h)

    def stop_on_interrupt(self) -> None:
        self.save_checkpoint()
        where = f" {self.run_dir}" if self.run_dir else ""
        raise Interrupted(f"interrupted at {self.env_steps:,} env steps; checkpoint saved. Resume with: "
                          f"evohpo train --resume{where}")

    # ----------------------------------------------------------------------------- helpers
    def act(self, obs: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        """Each member acts, with exploration, on its own slice of the pool (all in one pass)."""
        env_act, stored = self.actor.act([m.algo for m in self.members], [m.rng for m in self.members],
                                         obs, self.done)
        for a in self.spec.agents:  # a policy gone NaN must not drive the envs into NaN states
            if not np.isfinite(env_act[a]).all():
                np.nan_to_num(env_act[a], copy=False, nan=self.spec[a].low, posinf=self.spec[a].high,
                              neginf=self.spec[a].low)
                np.nan_to_num(stored[a], copy=False, nan=self.spec[a].low, posinf=self.spec[a].high,
                              neginf=self.spec[a].low)
        return env_act, stored

    def learn(self) -> None:
        """Every member learns once per ``learn_step`` of its own env steps, from the shared buffer."""
        ready = self.env_steps >= self.cfg.evolution.learning_delay
        for j, m in enumerate(self.members):
            while m.learn_acc >= m.hp.learn_step:
                m.learn_acc -= m.hp.learn_step
                if not ready or len(self.buffer) < m.hp.batch_size:
                    continue
                for _ in range(self.cfg.algo.gradient_steps):
                    if m.diverged:
                        break
                    metrics = m.algo.learn(self.buffer.sample(m.hp.batch_size, m.rng))
                    bad = [k for k, v in metrics.items() if not np.isfinite(v)]
                    if bad:
                        self.mark_diverged(m, f"non-finite {', '.join(bad)}")
                    stats = self.loss_stats[j]
                    for key, v in metrics.items():
                        name = key.split("/")[0]
                        stats[name] = stats.get(name, 0.0) + v
                    stats["n"] = stats.get("n", 0.0) + 1

    def track_episodes(self, res: StepResult) -> None:
        self.ep_return += sum(res.rewards[a] for a in self.fitness_agents)
        self.done = res.done
        if res.done.any():
            for i in np.flatnonzero(res.done):
                self.train_returns.append(float(self.ep_return[i]))
            self.ep_return[res.done] = 0.0

    def count_steps(self) -> None:
        self.env_steps += self.cfg.env.num_envs
        self.window_steps += self.k
        for m in self.members:
            m.steps += self.k
            m.learn_acc += self.k
        if (self.env_steps // self.cfg.env.num_envs) % 16 == 0:
            self.log.progress(self.env_steps, {})

    # ----------------------------------------------------------------------------- evaluation
    def evaluate(self, member: Member, seed: int) -> tuple[float, dict[str, float]]:
        """Mean return of complete, noise-free episodes on the evaluation envs (one per env)."""
        returns = episode_returns(member.algo, self.eval_pool, seed)
        per_agent = {a: float(r.mean()) for a, r in returns.items()}
        return float(sum(per_agent[a] for a in self.fitness_agents)), per_agent

    def evaluate_population(self) -> list[float]:
        seed = self.eval_seed = child_seed(self.eval_rng)  # every member meets the same episodes
        self.evaluated = list(self.members)  # the logs of this window describe these members
        results = self.evaluate_members(seed)
        fitness = [f for f, _ in results]
        self.eval_returns: list[dict[str, float]] = [per_agent for _, per_agent in results]
        for m, f in zip(self.members, fitness, strict=True):
            m.fitness.append(f)
        if all(m.diverged for m in self.members):
            where = f" ({self.run_dir / 'checkpoints' / 'latest.pt'})" if self.run_dir else ""
            raise Diverged(f"every member diverged by generation {self.generation} "
                           f"({'; '.join(f'member {m.id}: {m.diverged_why}' for m in self.members)}); "
                           f"the last good generation's checkpoint is kept{where}")
        return fitness

    def evaluate_members(self, seed: int) -> list[tuple[float, dict[str, float]]]:
        """(fitness, per-agent returns) of every member, in order (RayTrainer evaluates in its actors)."""
        results = []
        for m in self.members:
            broken = nonfinite_weights(m.algo)
            if broken:
                self.mark_diverged(m, f"non-finite weights in {broken}")
            if m.diverged:  # the worst fitness: it is replaced at this selection
                results.append((-np.inf, {a: float("nan") for a in self.spec.agents}))
            else:
                results.append(self.evaluate(m, seed))
        return results

    def mark_diverged(self, m: Member, why: str) -> None:
        if not m.diverged:
            m.diverged, m.diverged_why = True, why
            self.log.message(f"member {m.id} diverged ({why}); it stops learning and is replaced at the "
                             "next selection")

    def target_reached(self, fitness: list[float]) -> bool:
        target = self.cfg.evolution.target_fitness
        if target is not None and max(fitness) >= target:
            self.log.message(f"target fitness {target:g} reached: {max(fitness):.2f}")
            return True
        return False

    # ----------------------------------------------------------------------------- evolution
    def evolve(self, fitness: list[float]) -> list[evolution.MutationRecord]:
        """Tournament selection with elitism, then mutate every member but the elite."""
        ev = self.cfg.evolution
        parents = evolution.select(fitness, ev.tournament_size, ev.elitism, self.evo_rng)
        best = max(range(len(fitness)), key=lambda i: (not self.members[i].diverged, fitness[i], -i))
        parents = [best if self.members[p].diverged else p for p in parents]  # no diverged parents
        new_members: list[Member] = []
        records = [evolution.MutationRecord(self.generation, m.id, m.parent_id, "diverged", note=m.diverged_why)
                   for m in self.members if m.diverged]
        for slot, p in enumerate(parents):
            parent = self.members[p]
            if slot == 0 and ev.elitism:
                new_members.append(parent)
                records.append(evolution.MutationRecord(self.generation, parent.id, parent.parent_id, "elite",
                                                        note=f"fitness {fitness[p]:.3f}"))
                continue
            child = self.clone(parent)
            records.append(evolution.mutate(child, self.mutation_cfg, self.generation, self.evo_rng))
            records[-1].note = (records[-1].note + f"; parent fitness {fitness[p]:.3f}").lstrip("; ")
            new_members.append(child)
        self.members = new_members
        return records

    def clone(self, parent: Member) -> Member:
        seed = child_seed(self.evo_rng)
        child = dataclasses.replace(parent, id=self.next_id, parent_id=parent.id, algo=parent.algo.clone(seed),
                                    rng=np.random.default_rng(seed), born=self.generation + 1, fitness=[])
        self.next_id += 1
        return child

    # ----------------------------------------------------------------------------- logging
    def _reset_window_stats(self) -> None:
        self.loss_stats: list[dict[str, float]] = [{} for _ in self.members]
        self.train_returns: list[float] = []

    def log_generation(self, fitness: list[float], records: list[evolution.MutationRecord]) -> None:
        now = time.perf_counter()
        best = int(np.nanargmax(np.where(np.isnan(fitness), -np.inf, fitness)))
        self.best_ever = max(self.best_ever, fitness[best])
        window_s = max(now - self.window_start, 1e-9)
        m: dict[str, Any] = {
            "generation": self.generation,
            "time/elapsed_s": self.elapsed(now),
            "train/env_steps_per_s": self.window_steps * self.cfg.env.num_envs / self.k / window_s,
            "train/episodic_return": float(np.mean(self.train_returns)) if self.train_returns else None,
            "eval/best_fitness": fitness[best],
            "eval/mean_fitness": float(np.mean([f for f in fitness if np.isfinite(f)] or [-np.inf])),
            "eval/best_ever": self.best_ever,
            "eval/best_member": self.evaluated[best].id,
            "train/dropped_transitions": self.dropped,
            "train/env_restarts": self.restarts,
        }
        for a, r in self.eval_returns[best].items():
            m[f"eval/return/{a}"] = r
        for j, mem in enumerate(self.evaluated):
            pre = f"member/{mem.id}/"
            m[pre + "fitness"] = fitness[j]
            m[pre + "env_steps"] = mem.steps
            m[pre + "params"] = mem.algo.num_params()
            for agent, arch in mem.algo.arch().items():  # e.g. member/5/hidden/listener_0/actor = "64-64"
                for net in ("actor", "critic"):
                    m[f"{pre}hidden/{agent}/{net}"] = "-".join(map(str, arch[net]))
                m[f"{pre}activation/{agent}"] = arch["activation"]
            for k, v in dataclasses.asdict(mem.hp).items():
                m[pre + k] = v
            stats = self.loss_stats[j]
            for k in ("critic_loss", "actor_loss"):
                if k in stats:
                    m[pre + k] = stats[k] / stats["n"]
        for kind in (*evolution.KINDS, "elite"):
            m[f"evo/{kind}"] = sum(r.kind == kind for r in records)
        self.log.log(m, self.env_steps)
        self.log.lineage([r.to_json() for r in records])
        self.log.progress(self.env_steps, {"gen": self.generation, "best": f"{fitness[best]:.2f}",
                                           "mean": f"{np.mean(fitness):.2f}"})
        self.last_metrics = m
        self.generation += 1
        self.window_steps = 0
        self.window_start = time.perf_counter()
        self._reset_window_stats()

    def elapsed(self, now: float | None = None) -> float:
        """Wall seconds of the whole run, the sessions before a resume included."""
        return self.elapsed_before + (time.perf_counter() if now is None else now) - self.start

    def summary(self) -> dict[str, Any]:
        m = self.last_metrics
        return {"generations": self.generation, "env_steps": self.env_steps,
                "best_fitness": m["eval/best_fitness"], "mean_fitness": m["eval/mean_fitness"],
                "best_ever": self.best_ever, "best_member": m["eval/best_member"],
                "wall_s": time.perf_counter() - self.start}

    def close(self) -> None:
        self.pool.close()
        self.eval_pool.close()
