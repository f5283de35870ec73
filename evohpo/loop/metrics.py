"""One generation's metrics, as a pure function of what happened in its window.

Names are namespaced: ``train/``, ``eval/``, ``evo/``, and ``member/<id>/`` keyed by member id
(not slot), so a member's history reads as one series across generations.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from evohpo.evolve.lineage import MutationRecord
from evohpo.evolve.member import Member
from evohpo.evolve.mutations import KINDS
from evohpo.runtime import WindowStats
from evohpo.runtime.evaluate import Score


@dataclass(frozen=True)
class Window:
    """What one evolution window produced: the members evaluated, their scores, the records."""

    generation: int
    elapsed_s: float            # wall seconds of the whole run so far
    window_s: float             # wall seconds of this window
    env_steps: float            # population env steps collected in this window
    members: list[Member]       # the members evaluated, in slot order
    scores: list[Score]
    stats: WindowStats
    best_ever: float
    records: list[MutationRecord]
    kept: Score | None = None  # the kept best member, scored on fresh episodes


def best_index(fitness: list[float]) -> int:
    """The slot with the highest fitness (NaN counts as -inf; ties go to the lower slot)."""
    return int(np.nanargmax(np.where(np.isnan(fitness), -np.inf, fitness)))


def generation_metrics(w: Window) -> dict[str, Any]:
    fitness = [s.fitness for s in w.scores]
    best = best_index(fitness)
    m: dict[str, Any] = {
        "generation": w.generation,
        "time/elapsed_s": w.elapsed_s,
        "time/env_steps_per_s": w.env_steps / max(w.window_s, 1e-9),
        "train/episodic_return": (float(np.mean(w.stats.train_returns))
                                  if w.stats.train_returns else None),
        "eval/best_fitness": fitness[best],
        "eval/mean_fitness": float(np.mean([f for f in fitness if np.isfinite(f)] or [-np.inf])),
        "eval/best_ever": w.best_ever,
        "eval/best_member": w.members[best].id,
        "train/dropped_transitions": w.stats.dropped,
        "train/env_restarts": w.stats.restarts,
    }
    if w.kept is not None and np.isfinite(w.kept.std_error):
        m["eval/best_ever_se"] = w.kept.std_error
    for a, r in w.scores[best].per_agent.items():
        m[f"eval/return/{a}"] = r
    for j, mem in enumerate(w.members):
        m.update(member_metrics(mem, w.scores[j], w.stats.loss_stats[j]))
    for kind in ("birth", *KINDS, "elite"):
        m[f"evo/{kind}"] = sum(r.kind == kind for r in w.records)
    return m


def member_metrics(mem: Member, score: Score, stats: dict[str, float]) -> dict[str, Any]:
    pre = f"member/{mem.id}/"
    m: dict[str, Any] = {pre + "fitness": score.fitness}
    if np.isfinite(score.std_error):  # one episode has none
        m[pre + "fitness_se"] = score.std_error
    m.update({pre + "env_steps": mem.steps, pre + "params": mem.algo.num_params()})
    for agent, arch in mem.algo.arch().items():  # e.g. member/5/hidden/listener_0/actor = "64-64"
        for net in ("actor", "critic"):
            m[f"{pre}hidden/{agent}/{net}"] = "-".join(map(str, arch[net]))
        m[f"{pre}activation/{agent}"] = arch["activation"]
    for k, v in dataclasses.asdict(mem.hp).items():
        m[pre + k] = v
    for k in ("critic_loss", "actor_loss"):
        if k in stats:
            m[pre + k] = stats[k] / stats["n"]
    return m
