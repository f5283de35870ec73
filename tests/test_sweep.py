"""Sweeps: a grid of variants x seeds runs through `evohpo train`, each in its own run directory,
then one comparison report; a rerun skips finished runs and resumes longer ones."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
import yaml

from evohpo import config as C
from evohpo.cli import main
from evohpo.errors import ConfigError
from evohpo.sweep import load_sweep, run_job, status
from tests.test_trainer import TINY, read_jsonl

FIXED = {"mutation.none": 1.0, "mutation.hyperparameters": 0.0, "mutation.weights": 0.0,
         "mutation.architecture": 0.0, "mutation.activation": 0.0}


def sweep_file(tmp: Path, **over: Any) -> Path:
    base = tmp / "base.yaml"
    base.write_text(yaml.safe_dump({**TINY, "evolution": {**TINY["evolution"], "evo_steps": 8}}))
    spec = {"name": "tiny", "base": "base.yaml", "steps": 48, "seeds": [0, 1],
            "set": {"eval.episodes": 1, "env.kwargs": {"max_cycles": 8}},
            "variants": {"fixed": FIXED,
                         "evolved": {"mutation": {"none": 0.0, "hyperparameters": 1.0}}},
            **over}
    path = tmp / "tiny.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def test_sweep_runs_every_job_then_compares_and_reruns_resume(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path, out = sweep_file(tmp_path), tmp_path / "out"
    assert main(["sweep", str(path), "--out-dir", str(out), "--quiet"]) == 0
    # seed-major: both variants per seed
    names = ["fixed-s0", "evolved-s0", "fixed-s1", "evolved-s1"]
    assert [r["job"] for r in read_jsonl(out / "results.jsonl")] == names
    for name in names:
        run = out / name
        cfg = C.read_yaml(run / "config.yaml")
        assert cfg["seed"] == int(name[-1]) and cfg["steps"] == 48 and cfg["eval"]["episodes"] == 1
        assert cfg["env"]["kwargs"] == {"max_cycles": 8}
        assert ([m["env_steps"] for m in read_jsonl(run / "metrics.jsonl")]
                == [16, 32, 48])  # equal env steps
        kinds = {r["kind"] for r in read_jsonl(run / "lineage.jsonl")}
        assert kinds - {"birth"} == ({"elite", "none"} if name.startswith("fixed")
                                     else {"elite", "hyperparameters"})
    page = (out / "report.html").read_text()
    assert "<h3>evolved minus fixed</h3>" in page and "At 48 env steps" in page
    assert f"wrote {out / 'report.html'}" in capsys.readouterr().out
    # a rerun: nothing to do; a larger budget: every run resumes from its checkpoint
    sw = load_sweep(path, out)
    assert [status(j) for j in sw.jobs] == ["done"] * 4
    longer = load_sweep(path, out, steps=64)
    assert [status(j) for j in longer.jobs] == ["resume"] * 4
    res = run_job(longer.jobs[1], quiet=True)
    assert (res["state"], res["rc"]) == ("resume", 0)
    assert ([m["env_steps"] for m in read_jsonl(out / "evolved-s0" / "metrics.jsonl")]
            == [16, 32, 48, 64])
    # a run directory holding another config is not silently reused
    other = load_sweep(sweep_file(tmp_path, set={"eval.episodes": 2}), out)
    with pytest.raises(C.ConfigError, match="another config"):
        status(other.jobs[0])


def test_a_rerun_says_which_finished_jobs_it_skips(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path, out = sweep_file(tmp_path, variants={"fixed": FIXED}), tmp_path / "out"
    assert main(["sweep", str(path), "--out-dir", str(out), "--quiet", "--seeds", "0"]) == 0
    capsys.readouterr()
    assert main(["sweep", str(path), "--out-dir", str(out), "--quiet"]) == 0
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("[")]
    assert lines == [f"[1/2] fixed-s0: done, skipped -> {out / 'fixed-s0'}",
                     f"[2/2] fixed-s1: 48 env steps -> {out / 'fixed-s1'}"]
    assert main(["sweep", str(path), "--out-dir", str(out), "--dry-run"]) == 0
    assert [ln.split()[:2] for ln in capsys.readouterr().out.splitlines()] == [
        ["fixed-s0", "done"], ["fixed-s1", "done"]]


def test_jobs_grid_names_and_wandb_grouping(tmp_path: Path) -> None:
    path = sweep_file(tmp_path, grid={"algo.lr_actor": [0.001, 0.0003]}, seeds=[3])
    sw = load_sweep(path, tmp_path / "o", wandb="offline")
    assert [j.name for j in sw.jobs] == ["fixed-lr_actor=0.001-s3", "fixed-lr_actor=0.0003-s3",
                                         "evolved-lr_actor=0.001-s3", "evolved-lr_actor=0.0003-s3"]
    j = sw.jobs[1]
    assert (j.config["algo"]["lr_actor"] == 0.0003 and j.config["seed"] == 3
            and j.config["mutation"]["none"] == 1.0)
    w = j.config["logging"]["wandb"]
    assert (w["mode"], w["group"], w["name"]) == ("offline", "tiny", j.name)
    assert w["tags"] == ["tiny", "fixed", "seed3"]
    assert j.run_dir == tmp_path / "o" / j.name
    C.load([yaml.safe_load(yaml.safe_dump(j.config))])  # what `evohpo train --config` will read


def test_shipped_sweep_compares_mutation_only(tmp_path: Path) -> None:
    path = (Path(__file__).parent.parent / "configs" / "sweeps"
            / "evo_vs_fixed_speaker_listener.yaml")
    sw = load_sweep(path, tmp_path)
    fixed = [j for j in sw.jobs if j.variant == "fixed"]
    evolved = [j for j in sw.jobs if j.variant == "evolved"]
    # fixed is the reference
    assert len(fixed) == len(evolved) >= 2 and sw.jobs[0].variant == "fixed"
    for f, e in zip(fixed, evolved, strict=True):
        assert f.seed == e.seed and f.config["steps"] == e.config["steps"]   # equal env steps
        diff = {k for k in f.config if f.config[k] != e.config[k]}
        assert diff == {"mutation"}
        m = f.config["mutation"]
        assert m["none"] > 0 and (m["hyperparameters"] == m["weights"] == m["architecture"]
                                  == m["activation"] == 0)
        assert e.config["mutation"]["hyperparameters"] > 0
        assert f.config["env"]["name"] == "simple_speaker_listener"


def test_shipped_hpo_sweep_is_the_benchmarks_main_comparison(tmp_path: Path) -> None:
    """Random search, PBT as the preset ships it, selection alone and the tournament, from one
    sampled start per seed (the preset kept as member 0), at equal env steps."""
    root = Path(__file__).parent.parent
    sw = load_sweep(root / "configs" / "sweeps" / "hpo_value_speaker_listener.yaml", tmp_path)
    shipped = C.load([C.read_yaml(root / "evohpo" / "presets" / "matd3_speaker_listener.yaml")])
    by = {v: [j for j in sw.jobs if j.variant == v]
          for v in ("random_search", "pbt", "selection_only", "tournament")}
    assert sw.jobs[0].variant == "random_search" and len(sw.jobs) == sum(map(len, by.values()))
    assert len({len(js) for js in by.values()}) == 1 and len(by["pbt"]) >= 5
    for jobs in zip(*by.values(), strict=True):
        assert len({(j.seed, j.config["steps"]) for j in jobs}) == 1   # paired, equal budgets
        for j in jobs:
            assert j.config["population"]["init"] == "sample"
            assert j.config["population"]["keep_preset"] is True
        rs, pbt, sel, tour = (j.config for j in jobs)
        assert pbt["evolution"] == dataclasses.asdict(shipped.evolution)   # as shipped
        assert pbt["mutation"] == dataclasses.asdict(shipped.mutation)
        assert rs["evolution"]["strategy"] == "independent"
        assert sel["evolution"]["strategy"] == tour["evolution"]["strategy"] == "tournament"
        for off in (rs, sel):
            m = off["mutation"]
            assert m["none"] > 0 and (m["hyperparameters"] == m["weights"] == m["architecture"]
                                      == m["activation"] == 0)
        assert tour["mutation"]["hyperparameters"] > 0
        assert {k for k in rs if rs[k] != pbt[k]} <= {"evolution", "mutation"}


def test_a_grid_over_population_size_fits_the_presets_num_envs(tmp_path: Path) -> None:
    spec = {"name": "sizes", "base": "matd3_spread", "grid": {"population.size": [4, 6]}}
    path = tmp_path / "sizes.yaml"
    path.write_text(yaml.safe_dump(spec))
    jobs = load_sweep(path).jobs
    assert [(j.config["population"]["size"], j.config["env"]["num_envs"]) for j in jobs] == [
        (4, 8), (6, 12)]
    # a base file of the user's is taken as written
    (tmp_path / "mine.yaml").write_text(yaml.safe_dump({"env": {"num_envs": 8}}))
    path.write_text(yaml.safe_dump({**spec, "base": "mine.yaml"}))
    with pytest.raises(ConfigError, match=r"job default-size=6-s0: config key .env\.num_envs.: 8"):
        load_sweep(path)


@pytest.mark.parametrize(("over", "message"), [
    ({"colour": 1}, "unknown key 'colour'"),
    ({"variants": {"bad": {"algo.lr_actr": 1}}}, "job bad-s0: unknown config key 'algo.lr_actr'"),
    ({"seeds": [-1]}, "seeds must be"),
    ({"base": "nope"}, "presets: "),
    ({"grid": {"algo.tau": []}}, "grid must map"),
])
def test_bad_sweep_files_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                      over: dict, message: str) -> None:
    assert main(["sweep", str(sweep_file(tmp_path, **over)), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_bad_seeds_flag(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sweep", str(sweep_file(tmp_path)), "--seeds", "0,x", "--dry-run"]) == 2
    assert "--seeds '0,x'" in capsys.readouterr().err


def test_dry_run_lists_jobs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sweep", str(sweep_file(tmp_path)), "--out-dir", str(tmp_path / "o"), "--dry-run",
                 "--seeds", "4"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [ln.split()[:2] for ln in lines] == [["fixed-s4", "new"], ["evolved-s4", "new"]]
    assert not (tmp_path / "o").exists()
