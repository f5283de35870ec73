"""The driver's books: what it takes back from its actors."""

from __future__ import annotations

from typing import Any

import numpy as np

from evohpo.algos.generators import generator_fits
from evohpo.checkpoint import map_tree, rng_from


def writable(obj: Any) -> Any:
    """Copies of the read-only arrays Ray hands out (zero-copy views of its object store)."""
    return map_tree(obj, lambda x: x.copy() if isinstance(x, np.ndarray) and not x.flags.writeable
                    else x)


def take_members(rt: Any, g: int, report: dict[str, Any]) -> None:
    """Actor ``g``'s members' states and losses (``report``), into the driver ``rt``'s books."""
    for i, (j, st) in enumerate(zip(rt.held(g), report["members"], strict=True)):
        m = rt.members[j]
        algo = st["algo"]
        # a GPU actor's stream: kept for it as is
        if not generator_fits(algo["gen"], m.algo.device):
            rt.device_gens[m.id] = algo["gen"]
            algo = {**algo, "gen": m.algo.gen.get_state()}
        m.algo.load_state_dict(algo)
        m.rng = rng_from(st["rng"])
        m.steps, m.learn_acc = st["steps"], st["learn_acc"]
        if st["diverged"]:
            rt.mark_diverged(m, st["diverged_why"])
        stats = rt.loss_stats[j]
        for key, v in report["loss_stats"][i].items():
            stats[key] = stats.get(key, 0.0) + v
