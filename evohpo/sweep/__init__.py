"""``evohpo sweep configs/sweeps/NAME.yaml``: a grid of configs x seeds, one run each, one report.

A sweep file::

    name: evo_vs_fixed            # default: the file's name
    base: matd3_speaker_listener  # a shipped preset's name or a config file path
    set: {eval: {episodes: 8}}    # overrides for every job (nested, or dotted: eval.episodes: 8)
    steps: 500000                 # env steps per run (every job gets the same budget)
    seeds: [0, 1, 2]
    variants:                     # named overrides; the first is the reference of the comparison
      fixed: {mutation.none: 1, mutation.hyperparameters: 0}
      evolved: {}
    grid:                         # optional: every combination, crossed with the variants
      algo.lr_actor: [0.001, 0.0003]

Each job (variant x grid point x seed) runs with exactly what ``evohpo train --config JOB.yaml``
does, into ``<out_dir>/<job>/``; then ``<out_dir>/report.html`` compares them. Running the
same sweep again skips finished jobs and resumes an interrupted one from its checkpoint. Jobs
are plain data and :func:`run_job` needs nothing else, so another runner (Ray) can take the list.
"""

from __future__ import annotations

import argparse
import functools
import itertools
import json
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from evohpo import config as C
from evohpo import paths
from evohpo.config.argtypes import WandbMode, whole
from evohpo.errors import ConfigError, EvohpoError

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


def base_config(base: str | None, sweep_file: Path) -> dict[str, Any]:
    """A shipped preset's name or a config file (relative to the sweep file)."""
    from evohpo.config.presets import PRESETS_DIR

    if not base:
        return {}
    p = Path(base)
    candidates = [p] if p.is_absolute() else [
        sweep_file.parent / p, Path.cwd() / p, PRESETS_DIR / p, PRESETS_DIR / f"{base}.yaml"]
    for c in candidates:
        if c.is_file():
            return C.read_yaml(c)
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
    base = base_config(spec.get("base"), path)
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
            cfg = C.to_dict(C.load(layers))
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


# ----------------------------------------------------------------------------- running jobs

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


def run_job(job: Job, quiet: bool = False, overwrite: bool = False) -> dict[str, Any]:
    """Run one job exactly as ``evohpo train --config`` would (same code, in this process)."""
    from evohpo import api
    from evohpo.logs.loggers import atomic_write_text

    state = "new" if overwrite else status(job)
    t0 = time.perf_counter()
    rc = 0
    if state != "done":
        job.config_file.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(job.config_file, yaml.safe_dump(job.config, sort_keys=False))
        try:
            if state == "resume":
                api.resume(job.run_dir, steps=job.config["steps"], quiet=quiet)
            else:
                cfg, notes = api.resolve(job.config_file)
                api.train(cfg, run_dir=job.run_dir, quiet=quiet, notes=notes,
                          overwrite=state == "restart" or overwrite)
        except EvohpoError as e:
            print(f"evohpo: error: {e}", file=sys.stderr)
            rc = e.exit_code
        except KeyboardInterrupt:
            print("evohpo: interrupted", file=sys.stderr)
            rc = 130
    return {"job": job.name, "variant": job.variant, "seed": job.seed, "run_dir": str(job.run_dir),
            "state": state, "rc": rc, "wall_s": round(time.perf_counter() - t0, 1)}


def run_local(jobs: list[Job], quiet: bool = False, overwrite: bool = False,
              on_result: Callable[[dict[str, Any]], None] | None = None) -> list[dict[str, Any]]:
    """One job after another in this process; stops at Ctrl-C (the job checkpointed itself)."""
    results = []
    for i, job in enumerate(jobs):
        print(f"[{i + 1}/{len(jobs)}] {job.name}: {job.config['steps']:,} env steps -> "
              f"{job.run_dir}", flush=True)
        res = run_job(job, quiet, overwrite)
        results.append(res)
        if on_result:
            on_result(res)
        if res["rc"] == 130:
            break
    return results


RUNNERS: dict[str, Callable[..., list[dict[str, Any]]]] = {"local": run_local}


def runner(args: argparse.Namespace, sw: Sweep) -> Callable[..., list[dict[str, Any]]]:
    """local, or ray (--backend ray, --ray-address, or every job's distributed.backend: ray)."""
    ray = args.backend == "ray" or (args.backend is None and (args.ray_address is not None or (
        bool(sw.jobs) and all(j.config["distributed"]["backend"] == "ray" for j in sw.jobs))))
    if not ray:
        return RUNNERS["local"]
    from evohpo.runtime.ray import require_ray

    require_ray()
    from evohpo.sweep.ray_tasks import run_ray

    return functools.partial(run_ray, run_job, address=args.ray_address)


def cmd_sweep(args: argparse.Namespace) -> int:
    from evohpo.report import build_report

    try:
        seeds = [int(s) for s in args.seeds.split(",")] if args.seeds else None
    except ValueError:
        raise ConfigError(f"--seeds {args.seeds!r}: expected whole numbers separated by commas, "
                          "e.g. 0,1,2") from None
    sw = load_sweep(Path(args.sweep), Path(args.out_dir) if args.out_dir else None, args.steps,
                    seeds, args.wandb)
    if args.dry_run:
        for j in sw.jobs:
            state = status(j) if not args.overwrite else "new"
            print(f"{j.name:<32} {state:<8} {j.config['steps']:>13,} env steps  {j.run_dir}")
        return 0
    run = runner(args, sw)  # Ray asked for but missing: said before anything is written
    paths.output_dir(sw.out_dir, "sweep output")
    sw.out_dir.mkdir(parents=True, exist_ok=True)
    (sw.out_dir / "sweep.yaml").write_text(Path(args.sweep).read_text())
    log = open(sw.out_dir / "results.jsonl", "a")

    def record(res: dict[str, Any]) -> None:
        log.write(json.dumps({"time": time.strftime("%Y-%m-%dT%H:%M:%S"), **res}) + "\n")
        log.flush()

    print(f"sweep {sw.name}: {len(sw.jobs)} runs into {sw.out_dir}", flush=True)
    try:
        results = run(sw.jobs, quiet=args.quiet, overwrite=args.overwrite, on_result=record)
    finally:
        log.close()
    failed = [r for r in results if r["rc"] != 0]
    if results and results[-1]["rc"] == 130:
        print("sweep interrupted; run the same command again to continue (finished runs are "
              f"skipped, {results[-1]['job']} resumes from its checkpoint)")
        return 130
    done = [j.run_dir for j in sw.jobs if (j.run_dir / "metrics.jsonl").is_file()
            and (j.run_dir / "metrics.jsonl").stat().st_size]
    if done:
        out = build_report(done, sw.out_dir / "report.html", title=f"evohpo sweep {sw.name}")
        print(f"wrote {out}")
    if failed:
        print(f"{len(failed)} of {len(results)} runs failed: {', '.join(r['job'] for r in failed)} "
              f"(see {sw.out_dir / 'results.jsonl'})")
        return 1
    return 0


def add_parser(sub: Any) -> None:
    s = sub.add_parser("sweep",
                       help="run a grid of configs x seeds, then write their comparison report")
    s.add_argument("sweep", metavar="SWEEP.yaml", help="sweep file (see configs/sweeps/)")
    s.add_argument("--out-dir",
                   help="where the runs go (default: the file's out_dir, else runs/sweeps/NAME)")
    s.add_argument("--steps", type=whole("steps"),
                   help="env steps per run (overrides the sweep file)")
    s.add_argument("--seeds", help="comma-separated seeds (overrides the sweep file), e.g. 0,1")
    s.add_argument("--wandb", nargs="?", action=WandbMode,
                   choices=["online", "offline", "disabled"],
                   help="log every run to W&B (grouped by sweep): online or offline (bare: online, "
                        "unless WANDB_MODE says offline or disabled)")
    s.add_argument("--overwrite", action="store_true",
                   help="start every run afresh, replacing existing ones")
    s.add_argument("--quiet", action="store_true", help="no progress bar or per-generation lines")
    s.add_argument("--dry-run", action="store_true",
                   help="list the jobs and their state; run nothing")
    s.add_argument("--backend", choices=["local", "ray"],
                   help="local: one job after another; ray: jobs as parallel Ray tasks "
                        "(default: ray if every job's distributed.backend is ray)")
    s.add_argument("--ray-address", metavar="HOST:PORT",
                   help="run the jobs on this Ray cluster (implies ray)")
    s.set_defaults(func=cmd_sweep)
