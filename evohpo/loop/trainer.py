"""The training loop: collect a window -> play and score -> select and mutate -> place -> log ->
checkpoint.

The loop decides *when* things happen; the runtime (:mod:`evohpo.runtime`) decides *how* they
run: locally (one pool, one replay memory) or on Ray (member groups in actors). Scoring is
:mod:`evohpo.runtime.evaluate`'s, the next generation
:func:`evohpo.evolve.evolution.next_generation`'s, the logged metrics
:func:`evohpo.loop.metrics.generation_metrics`'s, and what a checkpoint holds
:class:`evohpo.loop.state.RunState`'s plus the runtime's.
"""

from __future__ import annotations

import contextlib
import dataclasses
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch

from evohpo import checkpoint
from evohpo.config import Config, to_dict
from evohpo.config.checks import check, fitness_agents
from evohpo.envs import spec_for
from evohpo.errors import Diverged, Interrupted
from evohpo.evolve.lineage import MutationRecord
from evohpo.evolve.member import child_seed
from evohpo.logs.loggers import Logger
from evohpo.loop.budget import whole_steps
from evohpo.loop.metrics import Window, generation_metrics
from evohpo.loop.populations import populations
from evohpo.loop.state import RunState
from evohpo.runtime import Runtime
from evohpo.runtime.backends import runtime_class
from evohpo.runtime.evaluate import Score


def torch_threads(cfg: Config) -> int:
    """Intra-op threads for torch: what the config says, else one.

    The networks are small (batches of a few hundred rows through 64-wide MLPs): a second thread
    buys nothing, while torch's OpenMP threads spin as they wait and starve env workers or other
    processes on the same cores (measured on 2 cores: 570 instead of 5,100 env steps/s).
    """
    return cfg.torch_threads or 1


class Trainer:
    def __init__(self, cfg: Config, logger: Logger | None = None, run_dir: Path | None = None,
                 runtime: type[Runtime] | None = None):
        self.cfg, self.run_dir = cfg, run_dir
        self.log = logger or Logger()
        self.interrupted = False
        self.stop_requested: Callable[[], bool] = lambda: False  # e.g. a callback said stop
        torch.set_num_threads(torch_threads(cfg))
        pool_ss, eval_ss, evo_ss, pop_ss = np.random.SeedSequence(cfg.seed).spawn(4)
        self.spec = spec_for(cfg.env)
        check(cfg, self.spec)  # the config against the env, once, before anything is built
        agents = fitness_agents(cfg.eval.fitness_agents, self.spec)
        self.runtime = (runtime or runtime_class(cfg))(
            cfg, self.spec, self.log, int(pool_ss.generate_state(1)[0]), agents, run_dir)
        b = cfg.mutation.bounds  # a batch never larger than the replay memory
        self.mutation_cfg = dataclasses.replace(cfg.mutation, bounds=dataclasses.replace(
            b, batch_size=dataclasses.replace(
                b.batch_size, max=min(b.batch_size.max, cfg.buffer.capacity))))
        # one population, or one per side of a game: the loop asks the same of either
        self.populations = populations(cfg, self.spec, self.runtime, agents)
        members, self.births = self.populations.first_generation(
            dataclasses.replace(cfg, mutation=self.mutation_cfg), np.random.default_rng(pop_ss),
            self.runtime.device)
        self.state = RunState(eval_rng=np.random.default_rng(eval_ss),
                              evo_rng=np.random.default_rng(evo_ss), members=members,
                              next_id=len(members))
        self.start = self.window_start = time.perf_counter()

    # what tests and callers read
    members = property(lambda self: self.state.members)
    generation = property(lambda self: self.state.generation)
    env_steps = property(lambda self: self.state.env_steps)
    buffer = property(lambda self: self.runtime.buffer)
    phases = property(lambda self: self.runtime.phases)  # where each window's time goes
    restarts = property(lambda self: self.runtime.restarts)
    dropped = property(lambda self: self.runtime.dropped)

    # ----------------------------------------------------------------------------- the loop
    def train(self) -> dict[str, Any]:
        s, ev = self.state, self.cfg.evolution
        a = self.cfg.algo
        self.log.message(f"env {self.spec.name}: {self.spec.describe()}")
        self.log.message(f"{self.populations.describe()}: {a.name}, hidden layers "
                         f"{'-'.join(map(str, a.hidden))} ({a.activation})"
                         + (", sampled starts" if self.cfg.population.init == "sample" else ""))
        self.runtime.start()
        self.place()
        self.start = time.perf_counter()
        self.window_start = self.start - s.window_before  # a resumed window's rate counts it all
        self.phases.start(s.phases_before)  # and so do its phases
        with self.interrupts():
            while True:
                # the checks come before collecting: a checkpoint is always taken here, so a
                # resumed run re-enters the loop exactly where the saved one left it
                if self.interrupted:
                    self.stop_on_interrupt()
                if s.env_steps >= whole_steps(self.cfg):
                    # checkpoint first: a resumed run with a larger budget redoes this evaluation
                    # (its console does not show the line again)
                    self.save_checkpoint(budget_end=True)
                    self.end_window(evolve=False)
                    break
                if s.window_steps >= ev.evo_steps:
                    stop = self.end_window(evolve=True)
                    self.save_checkpoint()
                    if stop or self.stop_requested():
                        break
                self.collect()
        return self.summary()

    def collect(self) -> None:
        """Run to the window's end or the budget's, whichever comes first (or an interrupt)."""
        s, cfg = self.state, self.cfg
        k = self.runtime.k
        n = min(-(-(cfg.evolution.evo_steps - s.window_steps) // k),
                (whole_steps(cfg) - s.env_steps) // cfg.env.num_envs)
        with self.phases("collect"):  # acting, learning and storing are phases of their own
            taken = self.runtime.collect(n, s.env_steps, s.generation, lambda: self.interrupted)
        s.env_steps += taken * cfg.env.num_envs
        s.window_steps += taken * k

    def end_window(self, evolve: bool) -> bool:
        """Score the members, keep the best, select and mutate, log. True: the target is reached."""
        with self.phases("learn"):
            self.runtime.finish_window()
        with self.phases("score"):
            scores = self.evaluate()
        with self.phases("confirm"):
            self.keep_best(scores)
        stop = evolve and self.target_reached(scores)
        with self.phases("evolve"):
            records = self.evolve(scores) if evolve and not stop else []
        records, self.births = self.births + records, []  # a new run: where each member started
        with self.phases("log"):
            self.log_generation(scores, records)
        self.next_window()
        return stop

    def evaluate(self) -> list[Score]:
        s = self.state
        self.eval_seed = child_seed(s.eval_rng)  # every member meets the same episodes
        self.evaluated = list(s.members)  # the logs of this window describe these members
        scores = self.populations.evaluate(s.members, self.eval_seed)
        for m, sc in zip(s.members, scores, strict=True):
            m.fitness.append(sc.fitness)
        if all(m.diverged for m in s.members):
            where = self.run_dir / "checkpoints" / "latest.pt" if self.run_dir else None
            kept = (f"the last good generation's checkpoint is kept ({where})"  # if it is
                    if where is not None and where.is_file() else "no checkpoint was written")
            why = "; ".join(f"member {m.id}: {m.diverged_why}" for m in s.members)
            raise Diverged(f"every member diverged by generation {s.generation} ({why}); {kept}")
        return scores

    def target_reached(self, scores: list[Score]) -> bool:
        target, best = self.cfg.evolution.target_fitness, max(sc.fitness for sc in scores)
        if target is not None and best >= target:
            self.log.message(f"target fitness {target:g} reached: {best:.2f}")
            return True
        return False

    def evolve(self, scores: list[Score]) -> list[MutationRecord]:
        s = self.state
        out = self.populations.next_generation(s.members, scores, s.generation, s.next_id,
                                               self.cfg.evolution, self.mutation_cfg, s.evo_rng)
        s.members, s.next_id = out.members, out.next_id
        return out.records

    def place(self) -> None:
        """The members into the runtime's slots, for the window that starts now."""
        self.populations.place(self.state.members, self.state.generation)

    def log_generation(self, scores: list[Score], records: list[MutationRecord]) -> None:
        s = self.state
        more = self.populations.window_metrics(self.evaluated, scores, s.generation, self.log)
        now = time.perf_counter()  # the window ends; the next starts at once: windows tile the run
        window_s, self.window_start = now - self.window_start, now
        pop_steps = s.window_steps * self.cfg.env.num_envs / self.runtime.k
        m = generation_metrics(Window(
            s.generation, self.elapsed(now), window_s, pop_steps, self.evaluated,
            scores, self.runtime.window(), s.best_ever, records,
            self.populations.confirmed()))
        m.update({**more, **self.phases.cut(now, window_s)})
        self.log.log(m, s.env_steps)
        self.log.lineage([r.to_json() for r in records])
        self.log.progress(s.env_steps, {"gen": s.generation,
                                        **self.populations.progress(scores, m)})
        self.last_metrics = m

    def next_window(self) -> None:
        self.state.generation += 1
        self.state.window_steps = 0
        self.runtime.new_window()
        self.place()

    # ----------------------------------------------------------------------------- checkpoints
    def save_checkpoint(self, budget_end: bool = False) -> None:
        if self.run_dir is None or not self.cfg.checkpoint.enabled:
            return
        with self.phases("checkpoint"):
            now = time.perf_counter()
            meta, tensors = self.state.to_checkpoint(self.cfg, self.elapsed(now), self.run_dir,
                                                     now - self.window_start, budget_end,
                                                     self.phases.so_far(now))
            rmeta, rtensors = self.runtime.state_dict(with_buffer=self.cfg.checkpoint.buffer)
            bmeta, btensors = self.populations.state_dict()
            self.write(self.run_dir / "checkpoints" / "latest.pt", {**meta, **rmeta, **bmeta},
                       {**tensors, **rtensors, **btensors})

    def restore(self, meta: dict[str, Any], tensors: dict[str, Any]) -> None:
        """Continue from a checkpoint's state (of a trainer built with the same config)."""
        self.state = RunState.from_checkpoint(self.cfg, self.spec, meta, tensors,
                                              self.runtime.device)
        if self.state.generation > 0:  # else the first window's end is still to write them
            self.births = []
        self.runtime.load_state_dict(meta, tensors)
        self.populations.load_state_dict(meta, tensors, self.runtime.device)

    def keep_best(self, scores: list[Score]) -> None:
        """Keep the member users get (checkpoints/best.pt, eval/best_ever): see
        :mod:`evohpo.loop.best`."""
        s = self.state
        kept = self.populations.keep(self.evaluated, scores, s.generation, s.env_steps,
                                     self.eval_seed, s.best_ever)
        if kept is None:
            return
        s.best_ever, member, algo = kept
        if self.run_dir is not None and self.cfg.checkpoint.enabled:
            meta = {"config": to_dict(self.cfg), "generation": s.generation,
                    "env_steps": s.env_steps, "member": member}
            self.write(self.run_dir / "checkpoints" / "best.pt", meta,
                       {"algo": algo.state_dict()})

    def write(self, path: Path, meta: dict[str, Any], tensors: dict[str, Any]) -> None:
        try:
            with self.phases("checkpoint"):
                checkpoint.save(path, meta, tensors)
        except checkpoint.CheckpointError as e:  # e.g. a full disk: keep training, try again later
            self.log.message(f"warning: {e}")

    # ----------------------------------------------------------------------------- interrupts
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
        raise Interrupted(f"interrupted at {self.state.env_steps:,} env steps; checkpoint saved. "
                          f"Resume with: evohpo train --resume{where}")

    # ----------------------------------------------------------------------------- the end
    def elapsed(self, now: float | None = None) -> float:
        """Wall seconds of the whole run, the sessions before a resume included."""
        return (self.state.elapsed_before + (time.perf_counter() if now is None else now)
                - self.start)

    def summary(self) -> dict[str, Any]:
        m, s = self.last_metrics, self.state
        return {"generations": s.generation, "env_steps": s.env_steps,
                "best_fitness": m["eval/best_fitness"], "mean_fitness": m["eval/mean_fitness"],
                "best_ever": s.best_ever, "best_member": m["eval/best_member"],
                "wall_s": self.elapsed(), **self.runtime.summary(),  # resumed sessions too
                **self.populations.summary(m)}

    def close(self) -> None:
        self.runtime.close()
        self.populations.close()
