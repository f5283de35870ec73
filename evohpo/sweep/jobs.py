"""A sweep file read into jobs (variant x grid point x seed, each a resolved config and a run
directory), and the state of a job's run directory. The sweep file's format is described in
:mod:`evohpo.sweep`."""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evohpo import config as C
from evohpo.errors import ConfigError

SWEEP_KEYS = ("name", "description", "base", "set", "steps", "seeds", "variants", "grid", "out_dir")


@dataclass(frozen=True)
class Job:
    name: str                  # <variant>[-<grid point>]-s<seed>: its run directory's name
    variant: str
    seed: int
    config: dict[str, Any]     # the resolved, validated config as plain data
    run_dir: Path
    config_file: Path          # what `evohpo train --config` reads


@dataclass(frozen=True)
class Sweep:
    name: str
    path: Path
    out_dir: Path
    jobs: list[Job]


# ----------------------------------------------------------------------------- reading a sweep file

def expand(d: Any, where: str) -> dict[str, Any]:
    """Nested overrides from a mapping whose keys may be dotted paths ({'a.b': 1} ->
    {'a': {'b': 1}})."""
    if d is None:
        return {}
    if not isinstance(d, dict):
        raise ConfigError(f"{where}: expected a mapping of config keys, not {type(d).__name__}")
    out: dict[str, Any] = {}
    for k, v in d.items():
        parts = str(k).split(".")
        if not all(parts):
            raise ConfigError(f"{where}: {k!r} is not a config key like algo.lr_actor")
        if isinstance(v, dict) and parts[-1] != "kwargs":  # env.kwargs are passed on as they are
            v = expand(v, f"{where}.{k}")
        for p in reversed(parts):
            v = {p: v}
        out = C.deep_merge(out, v)
    return out


def base_config(base: str | None, sweep_file: Path) -> tuple[dict[str, Any], bool]:
    """A shipped preset's name or a config file (relative to the sweep file): its layer, and
    whether it is a shipped preset."""
    from evohpo.config.presets import PRESETS_DIR

    if not base:
        return {}, False
    p = Path(base)
    candidates = [p] if p.is_absolute() else [
        sweep_file.parent / p, Path.cwd() / p, PRESETS_DIR / p, PRESETS_DIR / f"{base}.yaml"]
    for c in candidates:
        if c.is_file():
            return C.read_yaml(c), c.parent == PRESETS_DIR
    presets = sorted(q.stem for q in PRESETS_DIR.glob("*.yaml"))
    raise ConfigError(f"sweep {str(sweep_file)!r}: base {base!r} is neither a config file nor "
                      f"a preset (presets: {', '.join(presets)})")


def safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._=+-]+", "_", text).strip("_") or "job"


def load_sweep(path: Path, out_dir: Path | None = None, steps: int | None = None,
               seeds: list[int] | None = None, wandb: str | None = None) -> Sweep:
    """The sweep's jobs, every config validated before anything runs."""
    spec = C.read_yaml(path)
    unknown = [k for k in spec if k not in SWEEP_KEYS]
    if unknown:
        raise ConfigError(f"sweep {str(path)!r}: unknown key {unknown[0]!r}; known: "
                          f"{', '.join(SWEEP_KEYS)}")
    name = safe(str(spec.get("name") or path.stem))
    out = Path(out_dir or spec.get("out_dir") or Path("runs") / "sweeps" / name)
    base, shipped = base_config(spec.get("base"), path)
    common = expand(spec.get("set"), "set")
    seed_list = seeds if seeds is not None else spec.get("seeds", [0])
    seed_list = [seed_list] if isinstance(seed_list, int) else seed_list
    if not isinstance(seed_list, list) or not seed_list or not all(
            isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in seed_list):
        raise ConfigError(f"sweep {str(path)!r}: seeds must be a list of whole numbers >= 0, "
                          "e.g. [0, 1, 2]")
    variants = spec.get("variants") or {"default": {}}
    if not isinstance(variants, dict):
        raise ConfigError(f"sweep {str(path)!r}: variants must map names to config overrides")
    grid = spec.get("grid") or {}
    if not isinstance(grid, dict) or not all(isinstance(v, list) and v for v in grid.values()):
        raise ConfigError(f"sweep {str(path)!r}: grid must map config keys to non-empty lists "
                          "of values")
    budget = steps if steps is not None else spec.get("steps")
    jobs = []
    # seed-major order: a sweep cut short still holds every variant for the seeds it finished
    for seed, (vname, over), point in itertools.product(
            seed_list, variants.items(), itertools.product(*grid.values())):
        tag = "-".join(f"{k.split('.')[-1]}={v}" for k, v in zip(grid, point, strict=True))
        jname = safe("-".join(x for x in (str(vname), tag, f"s{seed}") if x))
        layers = [base, common, expand(over, f"variants.{vname}"),
                  expand(dict(zip(grid, point, strict=True)), "grid"),
                  {"seed": seed}, {"steps": budget} if budget is not None else {}]
        try:
            # a preset's num_envs is fitted to a population.size the sweep gives
            cfg = C.to_dict(C.load(layers, inherited=int(shipped)))
        except ConfigError as e:
            raise ConfigError(f"sweep {str(path)!r}, job {jname}: {e}") from None
        w = cfg["logging"]["wandb"]
        if wandb:
            w["mode"] = wandb
        if w["mode"] != "disabled":  # one W&B group per sweep, one run per job
            w["group"] = w["group"] or name
            w["name"] = w["name"] or jname
            w["tags"] = list(dict.fromkeys([*w["tags"], name, str(vname), f"seed{seed}"]))
        jobs.append(Job(jname, str(vname), seed, cfg, out / jname,
                        out / "configs" / f"{jname}.yaml"))
    names = [j.name for j in jobs]
    if len(set(names)) < len(names):
        raise ConfigError(f"sweep {str(path)!r}: two jobs would share a run directory; "
                          "give variants distinct names")
    return Sweep(name, path, out, jobs)


def status(job: Job) -> str:
    """new | done | resume | restart (a run directory without a checkpoint) for a job's run
    directory."""
    from evohpo.report.data import read_jsonl

    if not (job.run_dir / "config.yaml").is_file():
        return "new"
    have = C.to_dict(C.load([C.read_yaml(job.run_dir / "config.yaml")]))
    strip = ("steps", "logging", "distributed")  # where a run trains does not change what it is
    if ({k: v for k, v in have.items() if k not in strip}
            != {k: v for k, v in job.config.items() if k not in strip}):
        raise ConfigError(f"{str(job.run_dir)!r} holds a run with another config than job "
                          f"{job.name}; pass --overwrite to replace it, or --out-dir to run the "
                          "sweep elsewhere")
    rows = read_jsonl(job.run_dir / "metrics.jsonl")
    target = job.config["evolution"]["target_fitness"]
    if rows and (rows[-1].get("env_steps", 0) >= job.config["steps"] or
                 (target is not None and (rows[-1].get("eval/best_fitness") or -1e308) >= target)):
        return "done"
    return "resume" if (job.run_dir / "checkpoints" / "latest.pt").is_file() else "restart"
