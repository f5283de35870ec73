"""The report of a long run: the lineage tree stays readable at 100 generations."""

from __future__ import annotations

import base64
import io
import itertools
import json
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from evohpo import config as C
from evohpo.report import plots
from evohpo.report.data import load_run
from tests.test_trainer import TINY

REPORT_WIDTH = 1250  # px: the report's page shows wider images scaled down


def long_run(path: Path, generations: int = 100, pop: int = 4) -> Path:
    """A hand-made run: ``generations`` generations of ``pop`` members, elitism and tournaments."""
    rng = np.random.default_rng(0)
    path.mkdir(parents=True)
    (path / "config.yaml").write_text(
        C.dump(C.load([TINY, {"population": {"size": pop}, "env": {"num_envs": pop}}]))
    )
    ids, next_id, rows, lineage = list(range(pop)), pop, [], []
    kinds = ["none", "hyperparameters", "weights", "architecture", "activation"]
    for g in range(generations):
        fit = {i: float(g + rng.normal()) for i in ids}
        best = max(ids, key=lambda i: fit[i])
        row: dict[str, Any] = {
            "env_steps": 100 * (g + 1),
            "generation": g,
            "time/elapsed_s": g + 1.0,
            "eval/best_fitness": fit[best],
            "eval/best_member": best,
        }
        for i in ids:
            row.update({f"member/{i}/fitness": fit[i], f"member/{i}/lr_actor": 1e-3})
        rows.append(row)
        if g == generations - 1:
            break
        new = [best]
        lineage.append({"generation": g, "member_id": best, "parent_id": None, "kind": "elite"})
        for _ in range(pop - 1):
            parent = int(rng.choice(ids))
            lineage.append(
                {
                    "generation": g,
                    "member_id": next_id,
                    "parent_id": parent,
                    "kind": str(rng.choice(kinds)),
                }
            )
            new.append(next_id)
            next_id += 1
        ids = new
    (path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (path / "lineage.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lineage))
    return path


def test_lineage_tree_is_readable_at_100_generations(tmp_path: Path) -> None:
    run = load_run(long_run(tmp_path / "r"))
    assert len(run.generations()) == 100 and len(run.members) == 400
    # shown at its own size in the report: not scaled down to the page's width
    png = Image.open(io.BytesIO(base64.b64decode(plots.lineage_tree(run).png)))
    assert png.width <= REPORT_WIDTH
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    fig = plots.lineage_figure(run)
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    renderer = canvas.get_renderer()
    labels = [t for ax in fig.axes for t in ax.texts]
    assert sorted(t.get_text() for t in labels) == sorted(m.id for m in run.members)  # every member
    boxes = [t.get_window_extent(renderer) for t in labels]
    # no two labels overlap, and the generations stand well apart
    order = sorted(range(len(boxes)), key=lambda i: (boxes[i].y0, boxes[i].x0))
    for a, b in itertools.pairwise(order):
        if abs(boxes[a].y0 - boxes[b].y0) < 1:
            assert boxes[a].x1 <= boxes[b].x0, (labels[a].get_text(), labels[b].get_text())
    ax = fig.axes[0]
    x0, x1 = ax.transData.transform([(0, 0), (1, 0)])[:, 0]
    assert x1 - x0 >= 40  # px between generations
    assert min(t.get_fontsize() for t in labels) >= 7
