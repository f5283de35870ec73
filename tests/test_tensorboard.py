"""TensorBoard logging: a real run's event files, read back with TensorBoard's own reader, hold
the scalars W&B charts at the population's env steps; a resumed run shows each generation once;
without TensorBoard installed, asking for it is one clear line."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from evohpo import config as C
from evohpo.cli import main
from evohpo.logs.wandb import WandbLogger
from tests.test_trainer import read_jsonl
from tests.test_wandb import FakeRun

ARGS = ["--algo", "matd3", "--env", "simple_speaker_listener", "--quiet",
        "--set", "env.pool=sync", "--set", "env.num_envs=4", "--set", "population.size=4",
        "--set", "evolution.evo_steps=4", "--set", "evolution.learning_delay=0",
        "--set", "algo.batch_size=8", "--set", "algo.learn_step=4", "--set", "algo.hidden=[16]",
        "--set", "eval.episodes=1", "--set", "buffer.capacity=1000",
        "--set", "env.kwargs.max_cycles=8", "--set", "mutation.hyperparameters=1",
        "--set", "mutation.architecture=0.5"]
TB = ["--set", "logging.tensorboard=true"]


def scalars(run: Path) -> dict[str, list[tuple[int, float]]]:
    """Each scalar series in ``run/tensorboard`` as TensorBoard shows it: {tag: [(step, value)]}."""
    acc = EventAccumulator(str(run / "tensorboard"), size_guidance={"scalars": 0})  # keep all
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def wandb_series(run: Path) -> dict[str, list[tuple[int, float]]]:
    """The scalars W&B charts for the same run: its logs fed through the W&B logger."""
    fake = FakeRun()
    lg = WandbLogger(C.load([C.read_yaml(run / "config.yaml")]), run, run=fake)
    by_gen: dict[int, list[dict[str, Any]]] = {}
    for r in read_jsonl(run / "lineage.jsonl"):
        by_gen.setdefault(r["generation"], []).append(r)
    for m in read_jsonl(run / "metrics.jsonl"):
        lg.log(m, m["env_steps"])
        lg.lineage(by_gen.get(m["generation"], []))
    out: dict[str, list[tuple[int, float]]] = {}
    for row in fake.rows:
        for k, v in row.items():
            if k != "env_steps" and isinstance(v, (int, float)):
                out.setdefault(k, []).append((row["env_steps"], v))
    return out


def same(got: dict[str, list[tuple[int, float]]],
         want: dict[str, list[tuple[int, float]]]) -> None:
    assert sorted(got) == sorted(want)
    for tag, points in want.items():
        assert [s for s, _ in got[tag]] == [s for s, _ in points], tag
        # event files hold 32-bit floats
        assert [v for _, v in got[tag]] == pytest.approx([v for _, v in points], rel=1e-6), tag


def test_a_run_writes_what_wandb_charts_against_env_steps(tmp_path: Path) -> None:
    run = tmp_path / "run"
    assert main(["train", *ARGS, *TB, "--steps", "96", "--run-dir", str(run)]) == 0
    metrics, got = read_jsonl(run / "metrics.jsonl"), scalars(run)
    assert len(metrics) == 6
    steps = [m["env_steps"] for m in metrics]
    assert steps == [16, 32, 48, 64, 80, 96]  # the population's env steps, one per generation
    assert [s for s, _ in got["eval/best_fitness"]] == steps
    assert [v for _, v in got["generation"]] == [0, 1, 2, 3, 4, 5]
    for tag in ("eval/best_fitness", "eval/mean_fitness", "train/episodic_return",
                "time/env_steps_per_s", "time/elapsed_s"):
        want = [(m["env_steps"], m[tag]) for m in metrics if m.get(tag) is not None]
        assert len(want) >= 3 and [s for s, _ in got[tag]] == [s for s, _ in want]
        assert [v for _, v in got[tag]] == pytest.approx([v for _, v in want], rel=1e-6)
    # per member, keyed by id: hyperparameters, architecture as numbers, fitness
    last = metrics[-1]
    ids = {k.split("/")[1] for k in last if k.startswith("member/")}
    for i in ids:
        assert got[f"member/{i}/lr_actor"][-1] == (96, pytest.approx(last[f"member/{i}/lr_actor"]))
        assert got[f"member/{i}/hidden/speaker_0/actor/units"][-1][0] == 96
    assert any(k.startswith("evo/survived") for k in got) and "best/lr_actor" in got
    # exactly the scalars W&B charts, at the same steps
    same(got, wandb_series(run))


def test_a_resumed_run_shows_each_generation_once(tmp_path: Path) -> None:
    run = tmp_path / "run"
    assert main(["train", *ARGS, *TB, "--steps", "48", "--run-dir", str(run)]) == 0
    # the budget's final evaluation (generation 2 at 48 steps) comes after the last checkpoint:
    # the resumed run drops it from metrics.jsonl and evaluates generation 2 again later
    assert [v for _, v in scalars(run)["generation"]] == [0, 1, 2]
    assert main(["train", "--resume", str(run), "--steps", "96", "--quiet"]) == 0
    assert len(list((run / "tensorboard").glob("events.out.tfevents.*"))) == 2
    metrics, got = read_jsonl(run / "metrics.jsonl"), scalars(run)
    assert got["generation"] == [(m["env_steps"], m["generation"]) for m in metrics]
    assert [m["generation"] for m in metrics] == [0, 1, 2, 3, 4, 5]
    same(got, wandb_series(run))


def test_turned_on_at_a_resume_writes_the_earlier_generations(tmp_path: Path) -> None:
    run = tmp_path / "run"
    assert main(["train", *ARGS, "--steps", "48", "--run-dir", str(run)]) == 0
    assert not (run / "tensorboard").exists()
    raw = C.read_yaml(run / "config.yaml")
    raw["logging"]["tensorboard"] = True  # where and how a run logs may change on resume
    (run / "config.yaml").write_text(C.dump(C.load([raw])))
    assert main(["train", "--resume", str(run), "--steps", "80", "--quiet"]) == 0
    metrics, got = read_jsonl(run / "metrics.jsonl"), scalars(run)
    assert got["generation"] == [(m["env_steps"], m["generation"]) for m in metrics]
    assert len(metrics) == 5
    same(got, wandb_series(run))


def test_overwrite_removes_the_old_runs_event_files(tmp_path: Path) -> None:
    run = tmp_path / "run"
    assert main(["train", *ARGS, *TB, "--steps", "48", "--run-dir", str(run)]) == 0
    assert main(["train", *ARGS, "--steps", "32", "--run-dir", str(run), "--overwrite"]) == 0
    assert not (run / "tensorboard").exists()


def test_without_tensorboard_installed_it_is_one_clear_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    # what an environment without the extra has: the imports fail
    for name in ("tensorboard", "torch.utils.tensorboard"):
        monkeypatch.setitem(sys.modules, name, None)
    run = tmp_path / "run"
    assert main(["train", *ARGS, *TB, "--steps", "48", "--run-dir", str(run)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert "logging.tensorboard" in err and "pip install 'evohpo[tensorboard]'" in err
    assert not run.exists()  # nothing started: the same command runs once TensorBoard is there
