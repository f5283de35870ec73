"""The report's figures: matplotlib (Agg, no pyplot state), embedded as base64 PNG.

Every figure comes back as a :class:`Plot` that knows how many data points it drew, so an
empty axis is visible in the HTML (``data-points="0"``) and in the tests.
"""

from __future__ import annotations

import base64
import io
import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.collections import LineCollection
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import EngFormatter, MaxNLocator

from evohpo.report.data import MemberGen, Outcome, Run, layer_units, num, value

DPI = 90
KIND_COLORS = {"initial": "#7f7f7f", "elite": "#000000", "none": "#bcbd22",
               "hyperparameters": "#1f77b4", "weights": "#ff7f0e", "architecture": "#2ca02c",
               "activation": "#d62728"}
SPARE = ["#9467bd", "#8c564b", "#e377c2", "#17becf", "#aec7e8", "#ffbb78", "#98df8a", "#ff9896"]


@dataclass
class Plot:
    png: str        # base64
    points: int     # data points drawn
    caption: str


def kind_color(kind: str, kinds: Sequence[str] = ()) -> str:
    if kind in KIND_COLORS:
        return KIND_COLORS[kind]
    unknown = sorted(k for k in kinds if k not in KIND_COLORS) or [kind]
    return (SPARE[unknown.index(kind) % len(SPARE)] if kind in unknown
            else SPARE[hash(kind) % len(SPARE)])


def founder_colors(run: Run) -> dict[str, Any]:
    from matplotlib import colormaps

    founders = list(dict.fromkeys(m.founder for m in run.members))
    cmap = colormaps["tab10" if len(founders) <= 10 else "tab20"]
    return {f: cmap(i % cmap.N) for i, f in enumerate(founders)}


def count_points(fig: Figure) -> int:
    n = 0
    for ax in fig.axes:
        if ax.get_label() == "<colorbar>":
            continue
        n += sum(int(np.size(line.get_xdata())) for line in ax.lines)
        for c in ax.collections:
            n += (len(c.get_segments()) if isinstance(c, LineCollection)
                  else int(np.shape(c.get_offsets())[0]))
        n += len(ax.patches)
    return n


def render(fig: Figure, caption: str) -> Plot:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI)  # constrained layout already fits everything in
    return Plot(base64.b64encode(buf.getvalue()).decode(), count_points(fig), caption)


def grid(n: int, cols: int = 3, w: float = 4.6, h: float = 3.0) -> tuple[Figure, list[Axes]]:
    cols = max(1, min(cols, n))
    rows = math.ceil(n / cols)
    fig = Figure(figsize=(w * cols, h * rows), layout="constrained")
    axes = [fig.add_subplot(rows, cols, i + 1) for i in range(n)]
    return fig, axes


def steps_axis(ax: Axes, label: str = "env steps") -> None:
    ax.xaxis.set_major_formatter(EngFormatter(sep=""))
    ax.set_xlabel(label)
    ax.grid(alpha=0.3)


def maybe_log(ax: Axes, values: Sequence[float]) -> None:
    v = np.array([x for x in values if np.isfinite(x)])
    if len(v) and v.min() > 0 and v.max() / v.min() >= 10:
        ax.set_yscale("log")


# ----------------------------------------------------------------------------- one run

def fitness(run: Run) -> Plot:
    """Fitness against env steps and against wall time: each member, the mean, the best."""
    each = ("each team's mean (dashed) and best (solid), in the team's colour"
            if run.team_names() else "the population mean and best")
    return render(fitness_figure(run), "Fitness of every member at every evaluation (dots, "
                  f"coloured by founding lineage), {each}, against env steps (left) and wall "
                  "time (right).")


def fitness_figure(run: Run) -> Figure:
    fig, (a, b) = grid(2, 2, 6.0, 3.6)
    colors = founder_colors(run)
    gens = run.metrics
    # a game of several teams logs eval/* for its first team alone: each team's own lines
    teams = run.team_names()
    lines = [(f"team/{t}/", f"C{i % 10}", f"C{i % 10}", f"{t} ") for i, t in enumerate(teams)]
    for ax, xkey, scale, label in ((a, "env_steps", 1.0, "env steps"),
                                   (b, "time/elapsed_s", 60.0, "wall time (min)")):
        x = [num(m.get(xkey)) / scale for m in gens]
        xm = [(m.env_steps if xkey == "env_steps" else m.elapsed_s) / scale for m in run.members]
        ax.scatter(xm, [m.fitness for m in run.members], s=14, alpha=0.55,
                   c=[colors[m.founder] for m in run.members], label="members (colour: founder)")
        for pre, mean_color, best_color, name in lines or [("eval/", "#1f77b4", "k", "")]:
            ax.plot(x, [num(m.get(pre + "mean_fitness")) for m in gens], "--", color=mean_color,
                    lw=1.5, label=name + "mean")
            ax.plot(x, [num(m.get(pre + "best_fitness")) for m in gens], "-", color=best_color,
                    lw=2, label=name + "best")
        if not teams:  # cross-play fitness has no best ever: it compares within a generation
            ax.plot(x, [num(m.get("eval/best_ever")) for m in gens], ":", color="#d62728",
                    lw=1.5, label="best ever")
        if xkey == "env_steps":
            steps_axis(ax, label)
        else:
            ax.set_xlabel(label)
            ax.grid(alpha=0.3)
        ax.set_ylabel("fitness")
    a.legend(fontsize=8, loc="lower right")
    return fig


def segments(run: Run, key: str,
             y: Callable[[MemberGen, str], float]) -> tuple[list[Any], list[Any]]:
    """Line segments from each member's parent (previous generation) to it, and their colours."""
    colors = founder_colors(run)
    segs, cols = [], []
    for m in run.members:
        p = run.at.get((m.generation - 1, m.parent)) if m.parent is not None else None
        if p is not None:
            a, b = y(p, key), y(m, key)
            if np.isfinite(a) and np.isfinite(b):
                segs.append([(p.env_steps, a), (m.env_steps, b)])
                cols.append(colors[m.founder])
    return segs, cols


def trajectories(run: Run, keys: list[str], caption: str, categorical: bool = False) -> Plot | None:
    """One panel per field: every member's value, linked to its parent's, coloured by founder;
    the final best member's ancestry in black."""
    if not keys:
        return None
    fig, axes = grid(len(keys))
    colors = founder_colors(run)
    path = run.ancestry(run.final_best())
    for ax, key in zip(axes, keys, strict=True):
        y: Callable[[MemberGen, str], float] = value
        if categorical:
            cats = sorted({str(m.fields[key]) for m in run.members
                           if m.fields.get(key) is not None})
            index = {c: i for i, c in enumerate(cats)}

            def y(m: MemberGen, k: str, index: dict[str, int] = index) -> float:
                v = m.fields.get(k)
                return float(index[str(v)]) if v is not None else math.nan

            ax.set_yticks(range(len(cats)), cats)
        segs, cols = segments(run, key, y)
        ax.add_collection(LineCollection(segs, colors=cols, linewidths=1.2, alpha=0.7))
        ys = [y(m, key) for m in run.members]
        ax.scatter([m.env_steps for m in run.members], ys, s=12,
                   c=[colors[m.founder] for m in run.members])
        ax.plot([m.env_steps for m in path], [y(m, key) for m in path], "-", color="k", lw=2.2,
                alpha=0.8)
        if not categorical:
            maybe_log(ax, ys)
        ax.autoscale_view()
        ax.set_title(key + (" (units)" if any(isinstance(m.fields.get(key), str)
                                              for m in run.members)
                            and not categorical else ""), fontsize=9)
        steps_axis(ax)
    return render(fig, caption)


def training(run: Run, losses: list[str]) -> Plot | None:
    """Per-member losses, and the run's train/ metrics."""
    train = [k for k in dict.fromkeys(k for m in run.metrics for k in m)
             if k.startswith("train/") and any(np.isfinite(num(m.get(k))) for m in run.metrics)]
    if not losses and not train:
        return None
    fig, axes = grid(len(losses) + len(train))
    colors = founder_colors(run)
    for ax, key in zip(axes, losses, strict=False):
        ms = [m for m in run.members if np.isfinite(num(m.fields.get(key)))]
        ax.scatter([m.env_steps for m in ms], [num(m.fields[key]) for m in ms], s=12,
                   c=[colors[m.founder] for m in ms])
        maybe_log(ax, [num(m.fields[key]) for m in ms])
        ax.set_title(f"member {key}", fontsize=9)
        steps_axis(ax)
    for ax, key in zip(axes[len(losses):], train, strict=True):
        ax.plot([m["env_steps"] for m in run.metrics], [num(m.get(key)) for m in run.metrics],
                "o-", ms=3)
        ax.set_title(key, fontsize=9)
        steps_axis(ax)
    return render(fig, "Training: each member's mean losses over the window before each evaluation "
                       "(coloured by founder) and the run's train/ metrics.")


LINEAGE_ROW = 20  # generations per row of the lineage tree: about 50 px each at the report's width


def lineage_figure(run: Run) -> Figure:
    """Generations left to right in rows of LINEAGE_ROW, population slots top to bottom; an edge
    from each member to its parent, coloured by how the member was made, solid where selection
    then kept it. Rows keep the figure within the report's width, so nothing is scaled down."""
    from matplotlib.colors import Normalize

    gens = run.generations()
    pop = max(m.slot for m in run.members) + 1
    starts = list(range(min(gens), max(gens) + 1, LINEAGE_ROW))
    row_h = min(9.0, max(2.4, 0.45 * pop + 1.0))
    span = min(len(gens), LINEAGE_ROW)
    size = (max(8.0, 0.55 * span + 2.5), row_h * len(starts) + 0.6)
    fig = Figure(figsize=size, layout="constrained")
    axes = [fig.add_subplot(len(starts), 1, i + 1) for i in range(len(starts))]
    kinds = list(dict.fromkeys(m.made_by for m in run.members))
    path = {(m.generation, m.id) for m in run.ancestry(run.final_best())}
    fit = np.array([m.fitness for m in run.members], float)
    finite = fit[np.isfinite(fit)]
    norm = Normalize(*(float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0))
    sc = None
    for ax, start in zip(axes, starts, strict=True):
        end = start + LINEAGE_ROW - 1
        row = [m for m in run.members if start <= m.generation <= end]
        for m in row:  # an edge from the previous row enters at the left edge
            p = run.at.get((m.generation - 1, m.parent)) if m.parent is not None else None
            if p is None:
                continue
            xy = [(p.generation, p.slot), (m.generation, m.slot)]
            if (m.generation, m.id) in path:
                ax.plot(*zip(*xy, strict=True), color="k", lw=5, alpha=0.25, solid_capstyle="round")
            ax.plot(*zip(*xy, strict=True), color=kind_color(m.made_by, kinds), lw=1.8,
                    ls="-" if m.selected is not False else ":")
        sc = ax.scatter([m.generation for m in row], [m.slot for m in row],
                        c=[m.fitness for m in row], cmap="viridis", norm=norm,
                        s=[70 if m.selected else 35 for m in row], edgecolors="k", linewidths=0.5,
                        zorder=3)
        if pop <= 24:
            for m in row:
                ax.annotate(m.id, (m.generation, m.slot), xytext=(0, 6), textcoords="offset points",
                            fontsize=7, ha="center")
        if len(starts) > 1:  # every row the same scale, the last one too
            ax.set_xlim(start - 0.6, end + 0.6)
        ax.set_ylabel("population slot")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_ylim(pop - 0.4, -0.7)  # slot 0 (the elite's) on top
        ax.grid(alpha=0.2)
    axes[-1].set_xlabel("generation")
    if sc is not None:
        fig.colorbar(sc, ax=axes, label="fitness", shrink=0.8)
    handles = [Line2D([], [], color=kind_color(k, kinds), lw=2, label=k)
               for k in kinds if k != "initial"]
    handles += [Line2D([], [], color="grey", ls=":", label="not kept by the next selection"),
                Line2D([], [], color="k", lw=5, alpha=0.25, label="final best's ancestry")]
    fig.legend(handles=handles, fontsize=8, loc="outside lower center", ncol=min(len(handles), 5))
    return fig


def lineage_tree(run: Run) -> Plot:
    rows = " (in rows of 20 generations)" if len(run.generations()) > LINEAGE_ROW else ""
    return render(lineage_figure(run), f"Lineage{rows}: each dot is a member at an evaluation "
                  "(label: member id; colour: fitness; large: selection kept it as a parent or the "
                  "elite). Each edge joins a member to what it was cloned from, coloured by the "
                  "mutation that made it (elite: kept unchanged); dotted edges lead to members the "
                  "next selection dropped. The final best member's ancestry is shaded.")


def mutation_effects(outs: list[Outcome]) -> Plot | None:
    """Fitness change after each mutation kind (child next generation minus parent now)."""
    if not outs:
        return None
    kinds = list(dict.fromkeys(o.kind for o in outs))
    fig = Figure(figsize=(max(6.0, 1.3 * len(kinds) + 2), 3.8), layout="constrained")
    ax = fig.add_subplot()
    rng = np.random.default_rng(0)  # jitter only
    for i, k in enumerate(kinds):
        d = np.array([o.delta for o in outs if o.kind == k and np.isfinite(o.delta)])
        if not len(d):
            continue
        kept = [o.selected is True for o in outs if o.kind == k and np.isfinite(o.delta)]
        ax.scatter(i + rng.uniform(-0.18, 0.18, len(d)), d, s=16, alpha=0.7,
                   color=kind_color(k, kinds), edgecolors=["k" if s else "none" for s in kept],
                   linewidths=0.8)
        ax.plot([i - 0.3, i + 0.3], [d.mean()] * 2, color="k", lw=2)
    ax.axhline(0, color="grey", lw=0.8)
    ax.set_xticks(range(len(kinds)), kinds)
    ax.set_ylabel("fitness change")
    ax.grid(alpha=0.3, axis="y")
    return render(fig, "Fitness change that followed each mutation: the child's fitness at the "
                       "next evaluation minus its parent's at the selection (elite: the same "
                       "member one generation later; none: an unmutated clone, the control). "
                       "Bar: mean; black edge: the next selection kept the child.")


# ----------------------------------------------------------------------------- several runs

@dataclass
class Curve:
    label: str
    x: np.ndarray
    runs: list[np.ndarray]     # one per run, NaN outside the run's range


def compare(curves: dict[str, list[Curve]], caption: str) -> Plot:
    """One panel per metric: each group's mean over its runs with a +-1 std band, and the runs
    faint."""
    fig, axes = grid(len(curves), cols=3, w=5.0, h=3.4)
    for ax, (title, cs) in zip(axes, curves.items(), strict=True):
        for i, c in enumerate(cs):
            color = f"C{i % 10}"
            ys = np.array(c.runs)
            for y in ys:
                ax.plot(c.x, y, color=color, alpha=0.25, lw=1)
            with warnings.catch_warnings():  # a step no run reached: NaN, quietly
                warnings.simplefilter("ignore", RuntimeWarning)
                mean, std = np.nanmean(ys, axis=0), np.nanstd(ys, axis=0)
            ax.plot(c.x, mean, color=color, lw=2.2, label=f"{c.label} (n={len(ys)})")
            if len(ys) > 1:
                ax.fill_between(c.x, mean - std, mean + std, color=color, alpha=0.18, lw=0)
        ax.set_title(title, fontsize=9)
        if "wall" in title:
            ax.set_xlabel("wall time (min)")
            ax.grid(alpha=0.3)
        else:
            steps_axis(ax)
        ax.legend(fontsize=8, loc="lower right")
    return render(fig, caption)


__all__ = ["Plot", "compare", "fitness", "layer_units", "lineage_figure", "lineage_tree",
           "mutation_effects", "training", "trajectories"]
