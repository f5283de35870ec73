"""``evohpo sweep --backend ray``: the sweep's jobs as parallel Ray tasks.

Each job is one task that runs :func:`evohpo.sweep.run_job` (exactly ``evohpo train``, with the
local trainer) and asks Ray for the job's ``distributed.cpus_per_actor`` CPUs and
``distributed.gpus_per_actor`` GPUs (null: none); Ray runs as many at once as the cluster fits.
A task lost with its worker or node is retried (``distributed.max_actor_restarts`` times); the
retry resumes the job from its last checkpoint, as running the sweep again would. Run
directories are written by the task's node: on a multi-node cluster, put the sweep's
``--out-dir`` on a shared filesystem.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from evohpo import config as C
from evohpo.runtime.ray import connect, require_ray
from evohpo.sweep.jobs import Job


def as_local_job(job: Job) -> Job:
    """The job with absolute paths (a worker's directory may differ) and the local trainer (a task
    is one job's whole population; it does not start actors of its own)."""
    cfg = C.to_dict(C.load([job.config, {"distributed": {"backend": "local"}}]))
    return dataclasses.replace(job, config=cfg, run_dir=job.run_dir.resolve(),
                               config_file=job.config_file.resolve())


def _task(run_job: Callable[[Job, bool, bool], dict[str, Any]], job: Job, quiet: bool,
          overwrite: bool) -> dict[str, Any]:
    return run_job(job, quiet, overwrite)


def run_ray(run_job: Callable[[Job, bool, bool], dict[str, Any]], jobs: list[Job],
            quiet: bool = False, overwrite: bool = False,
            on_result: Callable[[dict[str, Any]], None] | None = None,
            address: str | None = None) -> list[dict[str, Any]]:
    """Every job as a Ray task running ``run_job`` (the sweep's), all submitted at once;
    results reported as they finish."""
    ray = require_ray()
    owns = connect(address if address is not None
                   else (jobs[0].config["distributed"]["address"] if jobs else None))
    task = ray.remote(_task)
    pending: dict[Any, Job] = {}
    for job in jobs:
        d = job.config["distributed"]
        ref = task.options(num_cpus=d["cpus_per_actor"], num_gpus=d["gpus_per_actor"] or 0,
                           max_retries=d["max_actor_restarts"], retry_exceptions=False,
                           name=f"evohpo-sweep-{job.name}").remote(run_job, as_local_job(job),
                                                                   quiet, overwrite)
        pending[ref] = job
    print(f"ray: {len(jobs)} jobs submitted as tasks to a cluster of "
          f"{ray.cluster_resources().get('CPU', 0):g} CPUs", flush=True)
    results: dict[str, dict[str, Any]] = {}
    try:
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            job = pending.pop(done[0])
            try:
                res = ray.get(done[0])
            except ray.exceptions.RayError as e:
                first = str(e).strip().splitlines()[0][:200] if str(e).strip() else type(e).__name__
                res = {"job": job.name, "variant": job.variant, "seed": job.seed,
                       "run_dir": str(job.run_dir), "state": "failed", "rc": 1, "error": first,
                       "wall_s": None}
            results[job.name] = res
            took = "" if res.get("wall_s") is None else f" in {res['wall_s']}s"
            what = ("done, skipped" if res["state"] == "done" and res["rc"] == 0
                    else f"rc {res['rc']}{took}")
            print(f"[{len(results)}/{len(jobs)}] {job.name}: {what} -> {job.run_dir}", flush=True)
            if on_result:
                on_result(res)
    except KeyboardInterrupt:
        for ref in pending:  # a running job gets SIGINT: it checkpoints and stops (rc 130)
            ray.cancel(ref)
        for ref, job in pending.items():
            try:
                res = ray.get(ref, timeout=60)
            except (ray.exceptions.RayError, TimeoutError):
                res = {"job": job.name, "variant": job.variant, "seed": job.seed,
                       "run_dir": str(job.run_dir), "state": "interrupted", "rc": 130,
                       "wall_s": None}
            results[job.name] = res
            if on_result:
                on_result(res)
    finally:
        if owns:
            ray.shutdown()
    ordered = [results[j.name] for j in jobs if j.name in results]
    if any(r["rc"] == 130 for r in ordered):  # cmd_sweep looks at the last result for an interrupt
        ordered.sort(key=lambda r: r["rc"] == 130)
    return ordered
