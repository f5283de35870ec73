"""The report: every section with real plots for a real tiny run, a YAML block that loads as a
config, known answers on a hand-made lineage (unknown kinds and hyperparameters included), and
the comparison of several runs at equal env steps."""

from __future__ import annotations

import base64
import html
import io
import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from PIL import Image

from evohpo import config as C
from evohpo.cli import main
from evohpo.report import build_report
from evohpo.report.data import classify, load_run, outcomes
from tests.test_trainer import NO_MUTATION, TINY, read_jsonl

SECTIONS = ("summary", "fitness", "hyperparameters", "architecture", "training", "lineage",
            "mutations", "best-config", "config", "system")
ARGS = ["--algo", "matd3", "--env", "simple_speaker_listener", "--quiet", "--steps", "96",
        "--set", "env.pool=sync", "--set", "env.num_envs=4", "--set", "population.size=4",
        "--set", "evolution.evo_steps=4", "--set", "evolution.learning_delay=0",
        "--set", "evolution.strategy=tournament",  # a mutation every window, for the figures
        "--set", "algo.batch_size=8", "--set", "algo.learn_step=4", "--set", "algo.hidden=[16]",
        "--set", "eval.episodes=1", "--set", "buffer.capacity=1000",
        "--set", "env.kwargs.max_cycles=8",
        "--set", "mutation.none=0.2", "--set", "mutation.hyperparameters=1",
        "--set", "mutation.weights=0.3",
        "--set", "mutation.architecture=0.5", "--set", "mutation.activation=0.3"]


def figures(page: str) -> list[tuple[int, Image.Image]]:
    out = []
    for points, data in re.findall(r"<figure class='plot' data-points='(\d+)'>"
                                   r"<img [^>]*src='data:image/png;base64,([^']+)'", page):
        out.append((int(points), Image.open(io.BytesIO(base64.b64decode(data))).convert("RGB")))
    return out


def coloured_pixels(img: Image.Image) -> int:
    """Pixels that are clearly not grey: data drawn in colour, not axes, ticks or text."""
    a = np.asarray(img).astype(int)
    return int(((a.max(axis=2) - a.min(axis=2)) > 60).sum())


def yaml_block(page: str) -> str:
    (text,) = re.findall(r"<pre class='yaml'[^>]*>(.*?)</pre>", page, re.S)
    return html.unescape(text)


def assert_self_contained(page: str) -> None:
    assert "<script" not in page and "<link" not in page and "@import" not in page
    # nothing fetched, only data: and anchors
    assert not re.search(r"""(src|href)=['"](?!data:|#)""", page)


def test_report_of_a_real_tiny_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "run"
    assert main(["train", *ARGS, "--run-dir", str(run)]) == 0
    assert main(["report", str(run)]) == 0
    out = run / "report.html"
    assert f"wrote {out}" in capsys.readouterr().out
    page = out.read_text()
    assert_self_contained(page)
    for sid in SECTIONS:
        assert f"<section id='{sid}'>" in page, sid
    figs = figures(page)
    # fitness, hyperparameters, architecture, activations, training, lineage, mutations
    assert len(figs) >= 6
    for points, img in figs:
        assert points > 0 and coloured_pixels(img) > 50
    # the YAML block is a valid config holding the final best member's hyperparameters
    text = yaml_block(page)
    cfg = C.load([yaml.safe_load(text)])
    last = read_jsonl(run / "metrics.jsonl")[-1]
    best = last["eval/best_member"]
    for hp in ("lr_actor", "lr_critic", "tau", "expl_noise"):
        assert getattr(cfg.algo, hp) == pytest.approx(last[f"member/{best}/{hp}"], rel=1e-5)
    for hp in ("batch_size", "learn_step"):
        assert getattr(cfg.algo, hp) == last[f"member/{best}/{hp}"]
    widths = {v for k, v in last.items() if k.startswith(f"member/{best}/hidden/")}
    assert "-".join(map(str, cfg.algo.hidden)) in widths
    assert f"member {best}" in text
    # versions and machine of the run
    assert "torch" in page and "cores" in page


def write_run(path: Path, shift: float = 0.0, seed: int = 0, **cfg_over: Any) -> Path:
    """A hand-made run: 3 members, 4 generations, every kind of record, an unknown hyperparameter
    ('dropout'), an unknown mutation kind ('crossover'); fitness = the numbers below + shift."""
    path.mkdir(parents=True)
    (path / "config.yaml").write_text(C.dump(C.load([TINY, {"seed": seed, "population": {"size": 3},
                                                            "env": {"num_envs": 3}}, cfg_over])))
    gens = [  # member id: (fitness, lr_actor, dropout, actor layers, activation)
        {0: (-30, 1e-3, 0.1, "64-64", "relu"), 1: (-20, 1e-3, 0.1, "64-64", "relu"),
         2: (-25, 1e-3, 0.1, "64-64", "relu")},
        {1: (-18, 1e-3, 0.1, "64-64", "relu"), 3: (-15, 1.2e-3, 0.1, "64-64", "relu"),
         4: (-22, 1e-3, 0.1, "64-64", "relu")},
        {3: (-14, 1.2e-3, 0.1, "64-64", "relu"), 5: (-10, 1.2e-3, 0.1, "80-64", "relu"),
         6: (-16, 1e-3, 0.08, "64-64", "relu")},
        {5: (-9, 1.2e-3, 0.1, "80-64", "relu"), 7: (-9.5, 1.2e-3, 0.1, "80-64", "relu"),
         8: (-12, 1.2e-3, 0.1, "64-64", "tanh")},
    ]
    rows = []
    for g, members in enumerate(gens):
        fit = {i: f + shift for i, (f, *_) in members.items()}
        best = max(fit, key=lambda i: fit[i])
        row: dict[str, Any] = {"env_steps": 300 * (g + 1), "generation": g,
                               "time/elapsed_s": 10.0 * (g + 1),
                               "time/env_steps_per_s": 30.0, "eval/best_fitness": fit[best],
                               "eval/mean_fitness": float(np.mean(list(fit.values()))),
                               "eval/best_ever": max(max(r["eval/best_fitness"] for r in rows)
                                                     if rows else -1e9,
                                                     fit[best]),
                               "eval/best_member": best}
        for i, (_, lr, drop, layers, act) in members.items():
            row.update({f"member/{i}/fitness": fit[i], f"member/{i}/env_steps": 100 * (g + 1),
                        f"member/{i}/params": 1000 + 10 * int(layers.split("-")[0]),
                        f"member/{i}/hidden/a/actor": layers, f"member/{i}/activation/a": act,
                        f"member/{i}/lr_actor": lr, f"member/{i}/dropout": drop,
                        f"member/{i}/critic_loss": 1.0 / (g + 1)})
        rows.append(row)

    def rec(g: int, m: int, p: int | None, kind: str, **kw: Any) -> dict[str, Any]:
        return {"generation": g, "member_id": m, "parent_id": p, "kind": kind, "target": "",
                "before": None, "after": None, "op": "", "note": "", **kw}

    lineage = [rec(0, 1, None, "elite"),
               rec(0, 3, 1, "hyperparameters", target="lr_actor", before=1e-3, after=1.2e-3,
                   op="*1.2"),
               rec(0, 4, 2, "crossover", target="x"),
               rec(1, 3, 1, "elite"),
               rec(1, 5, 3, "architecture", target="a/actor/layer0", before=[64, 64],
                   after=[80, 64], op="add_node +16"),
               rec(1, 6, 1, "hyperparameters", target="dropout", before=0.1, after=0.08, op="*0.8"),
               rec(2, 5, 3, "elite"), rec(2, 7, 5, "none"),
               rec(2, 8, 3, "activation", target="a/actor+critic", before="relu", after="tanh")]
    (path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows)
                                        + '{"env_steps": 13')
    (path / "lineage.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lineage))
    return path


def test_known_lineage_outcomes_and_discovered_fields(tmp_path: Path) -> None:
    run = load_run(write_run(tmp_path / "r"))  # the half-written last line is skipped
    assert len(run.metrics) == 4
    assert [m.elapsed_s for m in run.members[::3]] == [10, 20, 30, 40]
    f = classify(run)
    # from the config, and from a mutation's target
    assert f.hyperparameters == ["lr_actor", "dropout"]
    assert set(f.architecture) == {"params", "hidden/a/actor"} and f.categorical == ["activation/a"]
    assert f.losses == ["critic_loss"]
    best = run.final_best()
    assert (best.id, best.generation, best.made_by) == ("5", 3, "elite")
    chain = [(m.generation, m.id, m.made_by) for m in run.ancestry(best)]
    assert chain == [(0, "1", "initial"), (1, "3", "hyperparameters"), (2, "5", "architecture"),
                     (3, "5", "elite")]
    assert ({m.id: m.founder for m in run.members if m.generation == 3}
            == {"5": "1", "7": "1", "8": "1"})
    assert [m.selected for m in run.members if m.generation == 0] == [False, True, True]
    assert all(m.selected is None for m in run.members if m.generation == 3)
    got = {(o.kind, o.record["member_id"]): (o.delta, o.selected) for o in outcomes(run)}
    assert got == {("elite", 1): (2, True), ("hyperparameters", 3): (5, True),
                   ("crossover", 4): (3, False), ("elite", 3): (1, True),
                   ("architecture", 5): (5, True), ("hyperparameters", 6): (2, False),
                   ("elite", 5): (1, None), ("none", 7): (0.5, None), ("activation", 8): (2, None)}


def test_report_shows_unknown_kinds_and_hyperparameters(tmp_path: Path) -> None:
    run = write_run(tmp_path / "r")
    page = build_report([run]).read_text()
    assert_self_contained(page)
    for sid in SECTIONS:
        assert f"<section id='{sid}'>" in page
    mutations = page[page.index("<section id='mutations'>"):
                     page.index("<section id='best-config'>")]
    for kind in ("crossover", "architecture", "activation", "hyperparameters", "none", "elite"):
        assert f"<td>{kind}</td>" in mutations
    assert "<td>lr_actor up</td>" in mutations and "<td>dropout down</td>" in mutations
    assert all(points > 0 for points, _ in figures(page))
    cfg = yaml.safe_load(yaml_block(page))
    assert cfg["algo"]["lr_actor"] == pytest.approx(1.2e-3) and cfg["algo"]["hidden"] == [80, 64]
    assert cfg["algo"]["activation"] == "relu"
    C.load([cfg])
    assert "dropout = 0.1 (no config key holds it)" in yaml_block(page)


def test_comparison_of_seeds_and_settings(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    fixed = {"mutation": NO_MUTATION}
    runs = [write_run(tmp_path / "sw" / "fixed-s0", 0.0, 0, **fixed),
            write_run(tmp_path / "sw" / "fixed-s1", 1.0, 1, **fixed),
            write_run(tmp_path / "sw" / "evolved-s0", 5.0, 0),
            write_run(tmp_path / "sw" / "evolved-s1", 6.0, 1)]
    assert main(["report", *map(str, runs)]) == 0
    out = tmp_path / "sw" / "report.html"   # several runs: in their common directory
    page = out.read_text()
    assert_self_contained(page)
    assert "<section id='comparison'>" in page and "<h3>evolved minus fixed</h3>" in page
    for i in range(4):
        assert f"<section id='r{i}'>" in page and f"<section id='r{i}-lineage'>" in page
    comp = page[page.index("<section id='comparison'>"):page.index("<section id='r0'>")]
    assert "At 1,200 env steps" in comp
    # best fitness: fixed, evolved
    assert "-8.50 ± 0.71 (n=2)" in comp and "-3.50 ± 0.71 (n=2)" in comp
    assert "<span class='good'>+5.00</span> ± 0.71 (s.e.)" in comp and "+5.00, +5.00" in comp
    assert "+5.00 ± 0.00 (s.e., n=2); 95% CI [+5.00, +5.00]" in comp  # paired: +5 each seed
    # the member each run hands its user leads; the max over noisy estimates is not offered
    assert comp.index("<td>kept member</td>") < comp.index("<td>best fitness</td>")
    assert "best ever" not in comp
    assert "<td>mutation.none</td>" in comp
    assert all(points > 0 for points, _ in figures(comp))


def test_a_comparison_across_envs_warns_that_returns_do_not_compare(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    runs = [write_run(tmp_path / "sl-s0", 0.0, 0), write_run(tmp_path / "sl-s1", 1.0, 1),
            write_run(tmp_path / "spread-s0", 5.0, 0, env={"name": "simple_spread"},
                      algo={"name": "maddpg"})]
    assert main(["report", *map(str, runs)]) == 0
    warning = ("the runs are on 2 different envs (simple_speaker_listener: sl-s0, sl-s1; "
               "simple_spread: spread-s0); returns of different envs do not compare: the "
               "comparison sets them side by side only")
    said = capsys.readouterr().err.splitlines()  # (write_run's runs end in a torn line)
    assert [ln for ln in said if "torn" not in ln] == [f"evohpo: warning: {warning}"]
    page = (tmp_path / "report.html").read_text()
    comp = page[page.index("<section id='comparison'>"):page.index("<section id='r0'>")]
    assert f"<p class='bad'>Warning: {html.escape(warning)}.</p>" in comp
    # runs of one env (other algorithms included) compare: nothing to say
    other = write_run(tmp_path / "sl-maddpg", 2.0, 0, algo={"name": "maddpg"})
    assert main(["report", str(runs[0]), str(runs[1]), str(other)]) == 0
    assert "warning" not in capsys.readouterr().err
    assert "Warning:" not in (tmp_path / "report.html").read_text()


def test_wall_time_continues_across_resumes() -> None:
    from evohpo.report.data import continuous_time

    rows = [{"time/elapsed_s": t} for t in (5.0, 10.0, 2.0, 6.0, None, 1.0)]  # resumed twice
    assert [r["time/elapsed_s"] for r in continuous_time(rows)] == [5, 10, 12, 16, None, 17]


def test_report_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(tmp_path)]) == 2
    assert "not a run directory" in capsys.readouterr().err
    (tmp_path / "config.yaml").write_text(C.dump(C.load([TINY])))
    assert main(["report", str(tmp_path)]) == 2
    assert "no generations" in capsys.readouterr().err


def whole_run(path: Path) -> Path:
    """A hand-made run whose files end in whole lines."""
    run = write_run(path)
    metrics = (run / "metrics.jsonl").read_text()
    (run / "metrics.jsonl").write_text(metrics[: metrics.rindex("\n") + 1])
    return run


@pytest.mark.parametrize("name", ["metrics.jsonl", "lineage.jsonl"])
def test_report_says_it_dropped_a_torn_last_line(tmp_path: Path, name: str,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(whole_run(tmp_path / "whole"))]) == 0
    assert capsys.readouterr().err == ""  # whole lines: nothing to say
    run = whole_run(tmp_path / "run")
    path = run / name
    text = path.read_text()
    path.write_text(text[: len(text) - len(text.splitlines()[-1]) // 2 - 1])  # a run cut mid-write
    assert main(["report", str(run)]) == 0
    err = capsys.readouterr().err
    assert f"'{path}': dropped its torn last line" in err and len(err.splitlines()) == 1
