"""What evolution buys: the member a user gets, from several starts, against fixed hyperparameters
and random search, at equal env steps.

    python benchmarks/hpo_value.py --env simple_speaker_listener --algo matd3 --steps 2000000 \\
        --seeds 0,1,2,3,4 --starts preset,poor,poor_lr,sample \\
        --variants tournament,truncation,fixed,select --jobs 2 --out runs/hpo_value

Every (start, variant, seed) is one run. Its final ``checkpoints/best.pt`` (the member ``evohpo
eval`` and ``export`` give) is re-evaluated on ``--episodes`` fresh episodes (seed 10**6 + run
seed, never seen in training). The table gives each cell's mean and spread over seeds, and the
paired difference (same seeds) of each variant against ``--reference`` with a 95% t interval.
Finished runs are skipped when run again (their results are kept in ``results.jsonl``).

Starts and variants are overlay files, ``benchmarks/overlays/hpo/starts/<start>.yaml`` and
``benchmarks/overlays/hpo/variants/<variant>.yaml``, laid over the shipped preset in that order.
Starts: ``preset`` (the shipped config), ``poor`` (batch 32, learn_step 400), ``poor_lr``
(learning rates 10x too small), ``poor_lr_sample`` (the poor_lr config with population.init:
sample: member 0 keeps the poor learning rates, the others are drawn from the search space),
``sample`` (population.init: sample: a Latin hypercube over the search space, member 0 the
preset), ``unknown`` (the same sample with no member at the preset: a user who knows no good
hyperparameters for the env). Variants: ``tournament`` (evolution as shipped), ``truncation``
(PBT, a member replaceable after one window), ``ready`` (PBT, a member replaceable only after 5
windows of its own training; both without ``evolution.explore_kept``), ``explore`` (``ready``
with ``evolution.explore_kept``, the default: a ready bottom member within the noise explores
in place), ``rate`` (``explore`` that also searches each member's gradient steps per env step,
``mutation.bounds.min_updates_per_step``), ``fixed`` (selection off, no mutation: from
``sample`` this is random search), ``select`` (tournament selection without mutation).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

import numpy as np

from evohpo.report.compare import t95  # two-sided 95% t quantiles

# starts/<start>.yaml and variants/<variant>.yaml
OVERLAYS = Path(__file__).parent / "overlays" / "hpo"


def config(env: str, algo: str, start: str, variant: str, seed: int, steps: int,
           extra: list[str]) -> Any:
    """The shipped preset < the start's overlay < the variant's < ``extra`` overrides."""
    from evohpo import config as C
    from evohpo.api import preset_path

    return C.load([C.read_yaml(preset_path(algo, env)),
                   C.read_yaml(OVERLAYS / "starts" / f"{start}.yaml"),
                   C.read_yaml(OVERLAYS / "variants" / f"{variant}.yaml"),
                   {"env": {"pool": "sync"}}, *(C.parse_override(t) for t in extra),
                   {"steps": steps, "seed": seed}])


def one_run(env: str, algo: str, start: str, variant: str, seed: int, steps: int, episodes: int,
            out: Path, extra: list[str]) -> dict[str, Any] | None:
    """One run and its re-evaluation; None when results.jsonl has it already (another process
    finished it since this one was queued): a finished run is never overwritten."""
    import evohpo

    run_dir = out / run_name(env, algo, start, variant, seed)
    finished = {(r["env"], r["algo"], r["start"], r["variant"], r["seed"], r["steps"])
                for r in read_jsonl(out / "results.jsonl")}
    if (env, algo, start, variant, seed, steps) in finished:
        return None
    cfg = config(env, algo, start, variant, seed, steps, extra)
    t0 = time.perf_counter()
    result = evohpo.train(cfg, run_dir=run_dir, overwrite=True)
    run = evohpo.load_run(run_dir)
    returns = run.evaluate("best", episodes=episodes, seed=10**6 + seed)
    agents = run.config.eval.fitness_agents or list(returns)
    totals = np.sum([returns[a] for a in agents], axis=0)
    metrics = result.metrics
    best = run.member("best")
    return {"env": env, "algo": algo, "start": start, "variant": variant, "seed": seed,
            "steps": steps, "reeval": float(totals.mean()),
            "reeval_se": float(totals.std(ddof=1) / math.sqrt(len(totals))),
            "reported": best.info.get("fitness"), "best_member": best.id,
            "min_mean_fitness": min(m["eval/mean_fitness"] for m in metrics),
            "min_best_fitness": min(m["eval/best_fitness"] for m in metrics),
            "reached_40": any(m["eval/best_fitness"] >= -40 for m in metrics),
            "hyperparams": best.info.get("hyperparams"), "wall_s": time.perf_counter() - t0}


def run_name(env: str, algo: str, start: str, variant: str, seed: int) -> str:
    return f"{env}-{algo}-{start}-{variant}-s{seed}"


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()] \
        if path.exists() else []


def recheck(run_dir: Path, seed: int, episodes: int) -> dict[str, Any]:
    """The run's best.pt member on ``episodes`` more fresh episodes (seed 2 * 10**6 + run seed):
    its reported fitness and a 100-episode re-evaluation each carry a standard error of about
    2 points here, so their gap needs a sharper reference to show any bias."""
    import evohpo

    run = evohpo.load_run(run_dir)
    returns = run.evaluate("best", episodes=episodes, seed=2 * 10**6 + seed)
    agents = run.config.eval.fitness_agents or list(returns)
    totals = np.sum([returns[a] for a in agents], axis=0)
    return {"run": run_dir.name, "recheck": float(totals.mean()), "recheck_episodes": episodes,
            "recheck_se": float(totals.std(ddof=1) / math.sqrt(len(totals)))}


def trajectory(run_dir: Path) -> dict[str, Any]:
    """What the run's own log says: the lowest best and mean fitness after its best first
    reached -40 (a learner that falls apart drops far below random, -85, after that)."""
    path = run_dir / "metrics.jsonl"
    if not path.exists():
        return {}
    rows = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    best = [r["eval/best_fitness"] for r in rows]
    mean = [r["eval/mean_fitness"] for r in rows]
    first = next((i for i, b in enumerate(best) if b >= -40), None)
    if first is None:
        return {"reached_40": False}
    return {"reached_40": True, "after_40_min_best": min(best[first:]),
            "after_40_min_mean": min(mean[first:])}


def paired(a: dict[int, float], b: dict[int, float]) -> str:
    """The paired difference ``a - b`` over their common seeds, with a 95% t interval."""
    common = sorted(set(a) & set(b))
    if len(common) < 2:
        return ""
    d = np.array([a[s] - b[s] for s in common])
    half = t95(len(d) - 1) * d.std(ddof=1) / math.sqrt(len(d))
    return f"{d.mean():+.2f} [{d.mean() - half:+.2f}, {d.mean() + half:+.2f}] (n={len(d)})"


def summarize(rows: list[dict[str, Any]], reference: str, out: Path,
              compare: list[str], score: str = "reeval") -> None:
    """The table of finished runs; ``score``: each run's figure, ``reeval`` (the re-evaluation
    on --episodes fresh episodes) or ``recheck`` (on --recheck more; runs without it left out)."""
    by: dict[tuple[str, str], dict[int, dict[str, Any]]] = {}
    checked = {c["run"]: c for c in read_jsonl(out / "recheck.jsonl")}
    for r in rows:
        d = out / run_name(r["env"], r["algo"], r["start"], r["variant"], r["seed"])
        r = {**r, **trajectory(d), **checked.get(d.name, {})}
        if score in r:
            by.setdefault((r["start"], r["variant"]), {})[r["seed"]] = {**r, "score": r[score]}

    def reeval(cell: tuple[str, str]) -> dict[int, float]:
        return {s: r["score"] for s, r in by.get(cell, {}).items()}

    print("\n| start | variant | seeds | re-evaluated best (mean +- sd) | per seed | >= -30 | "
          f"paired diff vs {reference} (mean, 95% CI) | re-evaluated - reported | "
          "lowest best / mean fitness after reaching -40 | reported - recheck |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for (start, variant), cell in sorted(by.items()):
        seeds = sorted(cell)
        v = np.array([cell[s]["score"] for s in seeds])
        gap = np.array([cell[s]["reeval"] - cell[s]["reported"] for s in seeds])
        diff = paired(reeval((start, variant)), reeval((start, reference))) \
            if variant != reference else ""
        after: list[tuple[float, float]] = [
            (cell[s]["after_40_min_best"], cell[s]["after_40_min_mean"])
            for s in seeds if cell[s].get("after_40_min_best") is not None]
        low = (f"{min(a for a, _ in after):.1f} / {min(b for _, b in after):.1f} "
               f"({len(after)} reached)") if after else "never reached -40"
        rc = np.array([cell[s]["reported"] - cell[s]["recheck"] for s in seeds
                       if "recheck" in cell[s]])
        rcs = (f"{rc.mean():+.2f} (worst {rc[np.abs(rc).argmax()]:+.2f}; "
               f"{cell[seeds[0]].get('recheck_episodes')} episodes)") if len(rc) else ""
        print(f"| {start} | {variant} | {len(v)} | {v.mean():.2f} "
              f"+- {v.std(ddof=1) if len(v) > 1 else 0:.2f} | "
              f"{' / '.join(f'{x:.1f}' for x in v)} | {int((v >= -30).sum())}/{len(v)} | "
              f"{diff} | {gap.mean():+.2f} (worst {gap[np.abs(gap).argmax()]:+.2f}) | {low} | "
              f"{rcs} |")
    if compare:
        print("\n| comparison | paired diff (mean, 95% CI) |\n|---|---|")
        for c in compare:
            (a1, a2), (b1, b2) = (x.split("/") for x in c.split(":"))
            print(f"| {a1}/{a2} - {b1}/{b2} | {paired(reeval((a1, a2)), reeval((b1, b2)))} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--env", default="simple_speaker_listener")
    ap.add_argument("--algo", default="matd3")
    ap.add_argument("--steps", type=int, default=2_000_000)
    ap.add_argument("--seeds", default="0,1,2,3,4")
    ap.add_argument("--starts", default="preset,poor,poor_lr,sample")
    ap.add_argument("--variants", default="tournament,truncation,fixed,select")
    ap.add_argument("--cells", default="",
                    help="START/VARIANT,... to run instead of every start x variant")
    ap.add_argument("--reference", default="fixed", help="the variant the others are paired with")
    ap.add_argument("--episodes", type=int, default=100, help="fresh episodes per re-evaluation")
    ap.add_argument("--jobs", type=int, default=max(1, (os.cpu_count() or 2)),
                    help="runs at once (one core each)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="an override for every run (repeatable)")
    ap.add_argument("--out", default="runs/hpo_value")
    ap.add_argument("--summary-only", action="store_true", help="print the table of finished runs")
    ap.add_argument("--score", choices=["reeval", "recheck"], default="reeval",
                    help="each run's figure in the table: its re-evaluation, or its recheck")
    ap.add_argument("--recheck", type=int, default=0, metavar="N",
                    help="re-score every finished run's best.pt on N more fresh episodes "
                         "(recheck.jsonl; the summary compares it with the reported fitness)")
    ap.add_argument("--compare", default="sample/truncation:preset/fixed,"
                    "sample/truncation:sample/fixed,sample/tournament:sample/fixed",
                    help="paired comparisons across starts, START/VARIANT:START/VARIANT,...")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    log = out / "results.jsonl"
    done = read_jsonl(log)
    extra = list(args.set)  # read as YAML, as `evohpo --set`
    key = (args.env, args.algo, args.steps)
    have = {(r["start"], r["variant"], r["seed"]) for r in done
            if (r["env"], r["algo"], r["steps"]) == key}
    cells = ([tuple(c.split("/")) for c in args.cells.split(",")] if args.cells else
             [(s, v) for s in args.starts.split(",") for v in args.variants.split(",")])
    # seed after seed, so that a grid cut short still holds paired results
    todo = [(s, v, int(seed)) for seed in args.seeds.split(",") for s, v in cells
            if (s, v, int(seed)) not in have]
    if not args.summary_only and todo:
        print(f"{len(todo)} runs of {args.steps:,} env steps, {args.jobs} at a time", flush=True)
        os.environ.setdefault("WANDB_MODE", "disabled")
        with ProcessPoolExecutor(args.jobs) as pool:
            futures = {pool.submit(one_run, args.env, args.algo, s, v, seed, args.steps,
                                   args.episodes, out, extra): (s, v, seed) for s, v, seed in todo}
            for fut in as_completed(futures):
                r = fut.result()
                if r is None:
                    print(f"{'/'.join(map(str, futures[fut]))}: finished already, kept",
                          flush=True)
                    continue
                done.append(r)
                with open(log, "a") as f:
                    f.write(json.dumps(r) + "\n")
                print(f"{r['start']:>8} {r['variant']:>10} s{r['seed']}: re-evaluated "
                      f"{r['reeval']:7.2f} (reported {r['reported']:.2f}), "
                      f"{r['wall_s']:.0f}s", flush=True)
    rows = [r for r in done if (r["env"], r["algo"], r["steps"]) == key]
    if args.recheck:
        have_check = {c["run"] for c in read_jsonl(out / "recheck.jsonl")}
        dirs = [(out / run_name(r["env"], r["algo"], r["start"], r["variant"], r["seed"]),
                 r["seed"]) for r in rows]
        dirs = [(d, seed) for d, seed in dirs if d.name not in have_check]
        with ProcessPoolExecutor(args.jobs) as pool:
            jobs = [pool.submit(recheck, d, seed, args.recheck) for d, seed in dirs]
            for done_check in as_completed(jobs):
                with open(out / "recheck.jsonl", "a") as f:
                    f.write(json.dumps(done_check.result()) + "\n")
    print(f"\n{args.env}, {args.algo}, {args.steps:,} env steps; the final best.pt member "
          f"re-evaluated on {args.episodes} fresh episodes")
    if args.score == "recheck":
        print(f"scored on the --recheck episodes ({args.recheck or 'as checked'}), not --episodes")
    summarize(rows, args.reference, out, [c for c in args.compare.split(",") if c], args.score)


if __name__ == "__main__":
    main()
