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
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import yaml

from evohpo import paths
from evohpo.config.argtypes import WandbMode, whole
from evohpo.errors import ConfigError, EvohpoError
from evohpo.sweep.jobs import Job, Sweep, load_sweep, status

__all__ = ["Job", "Sweep", "add_parser", "cmd_sweep", "load_sweep", "run_job", "run_local",
           "status"]
P = TypeVar("P", bound=argparse.ArgumentParser)  # the CLI's parser class


# ----------------------------------------------------------------------------- running jobs

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
        # a finished job is skipped: said as --dry-run says it, not as a job that runs
        what = ("done, skipped" if not overwrite and status(job) == "done"
                else f"{job.config['steps']:,} env steps")
        print(f"[{i + 1}/{len(jobs)}] {job.name}: {what} -> {job.run_dir}", flush=True)
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


def add_parser(sub: argparse._SubParsersAction[P]) -> None:
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
