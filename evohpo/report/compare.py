"""Several runs side by side: group the seeds of one setting, and compare settings at equal env
steps.

Runs whose configs are equal but for the seed (and logging) form a group; each group is shown as
the mean and spread over its seeds. The first group is the reference the others are compared to.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from evohpo.report.data import Run, num
from evohpo.report.plots import Curve

IGNORED = ("seed", "logging", "distributed")   # keys that do not make runs differ in kind


@dataclass
class Group:
    label: str
    runs: list[Run]


def flatten(d: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(d, dict) and d and prefix != "env.kwargs":
        out: dict[str, Any] = {}
        for k, v in d.items():
            out.update(flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    return {prefix: d}


def setting(run: Run) -> dict[str, Any]:
    return {k: v for k, v in flatten(run.config).items() if k.split(".")[0] not in IGNORED}


def group_runs(runs: list[Run]) -> list[Group]:
    """Group by config minus seed; label by the shared run-name stem (``evolved-s0`` ->
    ``evolved``), else by what sets the group's config apart."""
    keyed: dict[str, list[Run]] = {}
    for r in runs:
        keyed.setdefault(repr(sorted(setting(r).items(), key=lambda kv: kv[0])), []).append(r)
    groups = list(keyed.values())
    diffs = differing_keys([setting(g[0]) for g in groups])
    out = []
    for g in groups:
        stems = {re.sub(r"[-_]?s(eed)?\d+$", "", r.name) for r in g}
        if len(stems) == 1 and next(iter(stems)):
            label = next(iter(stems))
        elif diffs:
            label = ", ".join(f"{k}={setting(g[0]).get(k)}" for k in diffs[:3])
        else:
            label = g[0].name
        out.append(Group(label, g))
    labels = [grp.label for grp in out]
    for i, grp in enumerate(out):  # two groups may share a stem: tell them apart
        if labels.count(grp.label) > 1:
            grp.label = f"{grp.label} #{i + 1}"
    return out


def mixed_envs(runs: list[Run]) -> str | None:
    """A warning where the runs are on different envs (whose returns do not compare), naming
    each env's runs; None where they share one."""
    envs: dict[str, list[str]] = {}
    for r in runs:
        envs.setdefault(str(r.config.get("env", {}).get("name")), []).append(r.name)
    if len(envs) < 2:
        return None
    named = "; ".join(f"{env}: {', '.join(names[:3])}"
                      + (f" and {len(names) - 3} more" if len(names) > 3 else "")
                      for env, names in envs.items())
    return (f"the runs are on {len(envs)} different envs ({named}); returns of different envs "
            "do not compare: the comparison sets them side by side only")


def differing_keys(settings: list[dict[str, Any]]) -> list[str]:
    keys = list(dict.fromkeys(k for s in settings for k in s))
    return [k for k in keys if len({repr(s.get(k)) for s in settings}) > 1]


def config_diff(groups: list[Group]) -> list[tuple[str, list[Any]]]:
    """(key, value per group) for every config key that differs between groups."""
    settings = [setting(g.runs[0]) for g in groups]
    return [(k, [s.get(k) for s in settings]) for k in differing_keys(settings)]


# ------------------------------------------------------------------------ curves at equal steps

def series(run: Run, key: str, xkey: str = "env_steps") -> tuple[np.ndarray, np.ndarray]:
    x = np.array([num(m.get(xkey)) for m in run.metrics])
    y = np.array([num(m.get(key)) for m in run.metrics])
    ok = np.isfinite(x) & np.isfinite(y)
    return x[ok], y[ok]


def on_grid(run: Run, key: str, grid: np.ndarray, xkey: str = "env_steps") -> np.ndarray:
    """``key`` at the grid's x values (linear between evaluations; NaN outside the run's range)."""
    x, y = series(run, key, xkey)
    if not len(x):
        return np.full(len(grid), np.nan)
    out = np.interp(grid, x, y)
    out[(grid < x[0]) | (grid > x[-1])] = np.nan
    return out


def curves(groups: list[Group], key: str, xkey: str = "env_steps",
           scale: float = 1.0) -> list[Curve]:
    out = []
    for g in groups:
        xs = np.unique(np.concatenate([series(r, key, xkey)[0] for r in g.runs]))
        out.append(Curve(g.label, xs / scale, [on_grid(r, key, xs, xkey) for r in g.runs]))
    return out


def common_steps(runs: list[Run]) -> int:
    """The env steps every run reached: comparisons are made there."""
    return min(int(r.final.get("env_steps", 0)) for r in runs)


def at_steps(run: Run, key: str, steps: int) -> float:
    return float(on_grid(run, key, np.array([float(steps)]))[0])


def upto(run: Run, steps: int) -> list[dict[str, Any]]:
    return [m for m in run.metrics if num(m.get("env_steps")) <= steps]


METRICS: dict[str, str] = {
    "kept member": "fitness of the member the run hands its user (checkpoints/best.pt) on fresh "
                   "episodes that played no part in choosing it (eval/best_ever), at the common "
                   "env steps: the figure to compare",
    "best fitness": "the generation's highest fitness at the common env steps (the luckiest of "
                    "several noisy estimates: biased upward)",
    "late best": "mean best fitness over the last quarter of the env steps",
    "mean best": "mean best fitness over all evaluations (area under the curve / steps)",
    "population mean": "mean fitness of the population at the common env steps",
}


def reference_keys(runs: list[Run]) -> dict[str, str]:
    """Games of several teams: {metric: logged key} for each team's champion against each fixed
    reference (random, heuristic, the first generation's champions). Cross-play fitness is
    relative to the opponents a run met, so across runs only these are comparable."""
    out: dict[str, str] = {}
    for run in runs:
        for row in run.metrics:
            for k in row:
                team, _, ref = k.removeprefix("vs/").partition("/")
                if k.startswith("vs/") and ref and not ref.endswith("/ref"):
                    out.setdefault(f"{team} vs {ref}", k)
    return out


def metrics_for(refs: dict[str, str]) -> dict[str, str]:
    """{metric: what it means}: ``METRICS``, or for games of several teams (``refs``, from
    :func:`reference_keys`) each team's champion against each reference."""
    return {name: f"the {k.split('/')[1]} team's champion, its team return against "
                  f"{k.split('/', 2)[2]} opponents ({k}), at the common env steps"
            for name, k in refs.items()} or METRICS


def run_scores(run: Run, steps: int, refs: dict[str, str] | None = None) -> dict[str, float]:
    if refs:
        return {name: at_steps(run, k, steps) for name, k in refs.items()}
    rows = upto(run, steps) or run.metrics[:1]
    best = np.array([num(m.get("eval/best_fitness")) for m in rows])
    late = np.array([num(m.get("eval/best_fitness")) for m in rows
                     if num(m.get("env_steps")) >= 0.75 * steps])
    return {"kept member": at_steps(run, "eval/best_ever", steps),
            "best fitness": at_steps(run, "eval/best_fitness", steps),
            "late best": float(np.nanmean(late)) if np.isfinite(late).any() else math.nan,
            "mean best": float(np.nanmean(best)) if np.isfinite(best).any() else math.nan,
            "population mean": at_steps(run, "eval/mean_fitness", steps)}


# two-sided 95% quantiles of Student's t by degrees of freedom (beyond 30: 2.0)
T95 = (math.nan, 12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201,
       2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
       2.060, 2.056, 2.052, 2.048, 2.045, 2.042)


def t95(df: int) -> float:
    return T95[df] if df < len(T95) else 2.0


@dataclass
class Stat:
    mean: float
    std: float
    n: int
    values: list[float]

    def __str__(self) -> str:
        if not np.isfinite(self.mean):
            return "n/a"
        return (f"{self.mean:.2f} ± {self.std:.2f} (n={self.n})" if self.n > 1
                else f"{self.mean:.2f}")


def stat(values: list[float]) -> Stat:
    v = [x for x in values if np.isfinite(x)]
    if not v:
        return Stat(math.nan, math.nan, 0, values)
    return Stat(float(np.mean(v)), float(np.std(v, ddof=1)) if len(v) > 1 else 0.0, len(v), values)


def scores(groups: list[Group], steps: int,
           refs: dict[str, str]) -> dict[str, dict[str, Stat]]:
    """{group label: {metric: mean +- std over the group's runs}}, all at ``steps`` env steps."""
    out = {}
    for g in groups:
        per = [run_scores(r, steps, refs) for r in g.runs]
        out[g.label] = {k: stat([p[k] for p in per]) for k in metrics_for(refs)}
    return out


@dataclass
class Delta:
    metric: str
    diff: float          # group mean minus reference mean
    se: float            # standard error of that difference (Welch); NaN with one run a side
    paired: list[float]  # per seed, where both groups ran that seed

    @property
    def paired_stat(self) -> Stat:
        """Mean and spread of the per-seed differences. Runs of one seed share the initial
        networks and the evaluation episodes, so this is the sharper comparison."""
        return stat(self.paired)


def deltas(ref: Group, other: Group, steps: int, refs: dict[str, str]) -> list[Delta]:
    a = {r.seed(): run_scores(r, steps, refs) for r in ref.runs}
    b = {r.seed(): run_scores(r, steps, refs) for r in other.runs}
    out = []
    for k in metrics_for(refs):
        sa, sb = stat([s[k] for s in a.values()]), stat([s[k] for s in b.values()])
        se = (math.sqrt(sa.std ** 2 / sa.n + sb.std ** 2 / sb.n) if sa.n > 1 and sb.n > 1
              else math.nan)
        paired = [b[s][k] - a[s][k] for s in b if s in a]
        out.append(Delta(k, sb.mean - sa.mean, se, paired))
    return out
