"""The budget: a run stops at it (in whole steps of its envs), the bar keeps its total, and the
replay memory reserves no more than the budget can fill, growing when a resume extends it."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from evohpo import checkpoint
from evohpo import config as C
from evohpo.algos.buffer import human_bytes
from evohpo.cli import main
from evohpo.runtime.memory import describe_sharing, replay_capacity, window_transitions
from tests.test_checkpoint import ARGS, logs, train
from tests.test_trainer import read_jsonl

LOUD = [a for a in ARGS if a != "--quiet"]  # with the console: its bar and lines

# 2 members x 2 envs: the pool moves 4 env steps at a time; windows of 16 steps per member
FOUR = ["--set", "env.num_envs=4", "--set", "evolution.evo_steps=16"]


def buffer_of(run: Path) -> dict[str, np.ndarray]:
    return checkpoint.numpify(checkpoint.load(run / "checkpoints" / "latest.pt")[1]["buffer"])


def test_a_run_stops_at_its_budget_and_the_bar_keeps_its_total(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # 70 is no multiple of 4: the run stops at 68, the last whole step within the budget
    assert main(["train", *LOUD, *FOUR, "--steps", "70", "--run-dir", str(tmp_path / "r")]) == 0
    out, err = capsys.readouterr()
    assert read_jsonl(tmp_path / "r" / "metrics.jsonl")[-1]["env_steps"] == 68
    assert "done: 3 generations, 68 env steps (the budget, 70, rounded down to whole steps of " \
           "the 4 envs) in" in out
    # tqdm drops a total that is passed; this bar ends full, at its total
    bars = re.findall(r"(\d[\d.]*k?)/(\d[\d.]*k?) \[", err)
    assert bars and bars[-1] == ("68.0", "68.0"), err[-300:]
    # a budget the envs meet exactly: no rounding to tell
    assert main(["train", *ARGS, *FOUR, "--steps", "64", "--run-dir", str(tmp_path / "e")]) == 0
    out = capsys.readouterr().out
    assert "done: 2 generations, 64 env steps in" in out


def test_the_mappo_preset_stops_within_its_budget(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """The preset's 256 envs move 256 env steps at a time: a budget of 2,000 is 1,792."""
    run = tmp_path / "m"
    assert main(["train", "--algo", "mappo", "--env", "simple_spread", "--steps", "2000",
                 "--set", "eval.episodes=2", "--set", "eval.confirm_episodes=2",
                 "--quiet", "--run-dir", str(run)]) == 0
    assert read_jsonl(run / "metrics.jsonl")[-1]["env_steps"] == 1792
    assert "1,792 env steps (the budget, 2,000, rounded down to whole steps of the 256 envs)" \
        in capsys.readouterr().out


def test_a_budget_below_one_step_and_a_resume_without_room_are_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["train", *ARGS, *FOUR, "--steps", "3", "--run-dir", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert err == ("evohpo: error: config key 'steps': 3 is less than one step of the pool's 4 "
                   "envs (env.num_envs); allowed: at least 4\n")
    assert not (tmp_path / "r").exists()
    assert main(["train", *ARGS, *FOUR, "--steps", "70", "--run-dir", str(tmp_path / "r")]) == 0
    capsys.readouterr()
    # 68 done; 70 leaves no room for another step of the 4 envs
    assert main(["train", "--resume", str(tmp_path / "r"), "--steps", "70", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "at least 72" in err and err.count("\n") == 1, err
    assert main(["train", "--resume", str(tmp_path / "r"), "--steps", "72", "--quiet"]) == 0
    assert read_jsonl(tmp_path / "r" / "metrics.jsonl")[-1]["env_steps"] == 72


def test_replay_memory_is_sized_to_the_budget_and_grows_on_resume(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = C.load([{"steps": 80, "buffer": {"capacity": 1000}}])
    assert replay_capacity(cfg) == 80
    assert replay_capacity(C.load([{"steps": 5000, "buffer": {"capacity": 1000}}])) == 1000
    # ARGS: buffer.capacity 1,000; a budget of 80 env steps fills 80 rows at most
    assert main(["train", *LOUD, "--steps", "80", "--run-dir", str(tmp_path / "part")]) == 0
    out = capsys.readouterr().out
    assert "replay memory: 80 transitions (what the budget can fill; buffer.capacity is 1,000)" \
           ", 13.1 KiB, taken from the system as it fills" in out, out
    part = buffer_of(tmp_path / "part")
    assert int(part["capacity"]) == 80 and int(part["size"]) == 80
    # the resume extends the budget: the memory grows, and the run goes on as one run would
    assert main(["train", "--resume", str(tmp_path / "part"), "--steps", "160"]) == 0
    assert "replay memory: 160 transitions" in capsys.readouterr().out
    assert train(tmp_path / "full", 160, "--quiet") == 0
    grown, full = buffer_of(tmp_path / "part"), buffer_of(tmp_path / "full")
    assert int(grown["capacity"]) == int(full["capacity"]) == 160
    for k in ("obs", "actions", "rewards", "next_obs", "pos", "size"):
        np.testing.assert_array_equal(grown[k], full[k])
    assert logs(tmp_path / "part") == logs(tmp_path / "full")


def test_a_window_is_announced_by_the_rule_that_sizes_the_replay_memory(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # 4 members x 10,000 env steps a window; a budget of 8,000 fills 8,000 transitions at most
    cfg = C.load([{"steps": 8000, "population": {"size": 4}, "env": {"num_envs": 8},
                   "evolution": {"evo_steps": 10_000}}])
    assert window_transitions(cfg) == replay_capacity(cfg) == 8000
    assert describe_sharing(cfg, 168, 3) == (
        f"ray: experience sharing moves ~{human_bytes(8000 * 168 * 2)} per window (8,000 "
        f"transitions x 168 B x 2 other actors); every actor keeps a {human_bytes(8000 * 168)} "
        "replay copy (8,000 transitions)")
    assert window_transitions(C.load([C.to_dict(cfg), {"steps": 10**6}])) == 40_000
    # a window is never cut: 15 env steps per member on 2 envs each are 8 steps of the 4 envs
    over = ["--set", "env.num_envs=4", "--set", "evolution.evo_steps=15"]
    for steps, rows in ((80, [32, 64, 80]), (20, [20])):
        run = tmp_path / str(steps)
        assert main(["train", *LOUD, *over, "--steps", str(steps), "--run-dir", str(run)]) == 0
        ran = C.load([C.read_yaml(run / "config.yaml")])
        assert [m["env_steps"] for m in read_jsonl(run / "metrics.jsonl")] == rows
        assert window_transitions(ran) == rows[0]
        line = describe_sharing(ran, 168, 2)
        assert f"({rows[0]} transitions x 168 B x 1 other actor)" in line
        replay = f"replay memory: {replay_capacity(ran)} transitions"
        assert replay in capsys.readouterr().out and f"({replay_capacity(ran)} transitions)" in line
