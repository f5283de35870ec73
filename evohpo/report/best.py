"""The final best member's hyperparameters and architecture as a config ready to reuse."""

from __future__ import annotations

import copy
from collections import Counter
from typing import Any

import yaml

from evohpo.errors import ConfigError
from evohpo.report.data import LAYERS, Run, classify


def tidy(v: Any, like: Any) -> Any:
    """A logged value in the type of the config's value: ints stay ints, floats get 6 digits."""
    if isinstance(like, int) and not isinstance(like, bool) and float(v).is_integer():
        return int(v)
    if isinstance(v, float):
        return float(f"{v:.6g}")
    return v


def best_config(run: Run) -> tuple[str, str | None]:
    """(YAML text, error) for the run's config with the final best member's settings in ``algo``.

    The error is None when the YAML loads as a valid config (it should always).
    """
    from evohpo import config as C

    m = run.final_best()
    cfg = copy.deepcopy(run.config)
    algo = cfg.setdefault("algo", {})
    notes = []
    algo_keys = {k.removeprefix("algo.") for k, _, _ in C.describe_keys() if k.startswith("algo.")}
    for k in classify(run).hyperparameters:
        v = m.fields.get(k)
        if v is None:
            continue
        if k in algo_keys:
            algo[k] = tidy(v, algo.get(k, v))
        else:
            notes.append(f"{k} = {v} (no config key holds it)")
    specs = {k: v for k, v in m.fields.items() if isinstance(v, str) and LAYERS.fullmatch(v)}
    if specs:
        common, _ = Counter(specs.values()).most_common(1)[0]
        algo["hidden"] = [int(w) for w in common.split("-")]
        if len(set(specs.values())) > 1:
            each = ", ".join(f"{k.removeprefix('hidden/')} {v}" for k, v in specs.items())
            notes.append(f"networks differ ({each}); algo.hidden is one for all: {common} "
                         "(the most common; ties go to the first)")
    acts = {k: v for k, v in m.fields.items() if k.startswith("activation") and isinstance(v, str)}
    if acts:
        algo["activation"] = Counter(acts.values()).most_common(1)[0][0]
        if len(set(acts.values())) > 1:
            each = ", ".join(f"{k.removeprefix('activation/')} {v}" for k, v in acts.items())
            notes.append(f"activations differ ({each}); algo.activation is one for all: "
                         f"{algo['activation']} (the most common)")
    head = [f"Final best member of run {run.name}: member {m.id}, generation {m.generation}, "
            f"fitness {m.fitness:.3f} at {m.env_steps:,} env steps.",
            "Its evolved hyperparameters and architecture are in algo.*; everything else is as "
            "the run had it.",
            *notes,
            "To train these settings without evolving them: --set mutation.none=1 and set every "
            "other mutation.* probability to 0."]
    text = "".join(f"# {line}\n" for line in head) + yaml.safe_dump(cfg, sort_keys=False)
    try:
        C.load([yaml.safe_load(text)])
    except ConfigError as e:
        return text, str(e)
    return text, None

