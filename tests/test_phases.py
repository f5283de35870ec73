"""Where a generation's wall time goes (:mod:`evohpo.runtime.phases`): known answers on a clock
the test moves by hand, and real runs whose slow parts (a slow env, a slow disk) show up in their
own phase and nowhere else."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from evohpo import checkpoint
from evohpo import config as C
from evohpo.cli import main
from evohpo.logs.loggers import Logger
from evohpo.loop.trainer import Trainer
from evohpo.runtime.phases import PHASES, Phases
from tests.test_competitive import SCRIPTED, tag_cfg
from tests.test_trainer import TINY, read_jsonl, tiny


class Hand:
    """A clock that moves only when the test says."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_nested_phases_count_each_second_once_and_other_is_what_remains() -> None:
    t = Hand()
    ph = Phases(("a", "b", "c"), clock=t)
    ph.start()
    t.now = 1
    with ph("a"):
        t.now = 3
        with ph("b"):       # a stops counting while b runs
            t.now = 7
            with ph("a"):   # the same name again inside: still each second once
                t.now = 8
            t.now = 10
        t.now = 12
    t.now = 15              # outside every phase: other
    assert ph.cut(15, 15.0) == {"time/window_s": 15, "time/phase/a_s": 2 + 1 + 2,
                                "time/phase/b_s": 4 + 2, "time/phase/c_s": 0,
                                "time/phase/other_s": 1 + 3}


def test_a_window_ends_inside_a_phase_and_the_next_window_has_the_rest() -> None:
    t = Hand()
    ph = Phases(("log",), clock=t)
    t.now = 20
    ph.start()
    t.now = 21
    with ph("log"):
        assert ph.so_far(24) == {"log": 3}
        assert ph.cut(25, 5.0) == {"time/window_s": 5, "time/phase/log_s": 4,
                                   "time/phase/other_s": 1}
        t.now = 27
    assert ph.cut(30, 5.0) == {"time/window_s": 5, "time/phase/log_s": 2,
                               "time/phase/other_s": 3}


def test_each_teams_learning_is_a_part_of_learn_and_a_resumed_window_goes_on() -> None:
    t = Hand()
    ph = Phases(("learn", "score"), teams=("red", "blue"), clock=t)
    ph.start({"learn": 2.0, "score": 1.0})  # before a checkpoint, in the same window
    with ph("learn"):         # drawing the round's batches: learn alone
        t.now = 1
        with ph("learn/red"):
            t.now = 4
        with ph("learn/blue"):
            t.now = 6
        t.now = 7
    assert ph.cut(7, 10.0) == {"time/window_s": 10, "time/phase/learn_s": 2 + 2 + 3 + 2,
                               "time/phase/score_s": 1, "time/phase/learn/red_s": 3,
                               "time/phase/learn/blue_s": 2, "time/phase/other_s": 0}


# ----------------------------------------------------------------------------- runs

class Rows(Logger):
    """Every generation's metrics; ``at`` is called as each is logged."""

    def __init__(self, at: Any = None) -> None:
        self.rows: list[dict[str, Any]] = []
        self.at = at

    def log(self, metrics: dict[str, Any], step: int) -> None:
        self.rows.append(metrics)
        if self.at is not None:
            self.at()


def run(cfg: C.Config, run_dir: Path | None = None, at: Any = None) -> list[dict[str, Any]]:
    rows = Rows(at)
    t = Trainer(cfg, rows, run_dir)
    try:
        t.train()
    finally:
        t.close()
    return rows.rows


def phase(row: dict[str, Any], name: str) -> float:
    return float(row[f"time/phase/{name}_s"])


def check_tiled(rows: list[dict[str, Any]], names: tuple[str, ...] = PHASES,
                teams: tuple[str, ...] = ()) -> None:
    """Every row holds every phase; the phases and other add up to the window's time, and each
    team's learning is a part of learn."""
    want = {f"time/phase/{n}_s" for n in (*names, *(f"learn/{t}" for t in teams), "other")}
    for r in rows:
        assert {k for k in r if k.startswith("time/phase/")} == want
        assert all(r[k] >= 0 for k in want)
        total = sum(phase(r, n) for n in (*names, "other"))
        assert total == pytest.approx(r["time/window_s"], abs=1e-5)
        assert sum(phase(r, f"learn/{t}") for t in teams) <= phase(r, "learn") + 1e-5


def test_a_runs_phases_tile_its_windows_and_its_windows_tile_the_run(tmp_path: Path) -> None:
    args = ["train", "--config", str(tmp_path / "tiny.yaml"), "--steps", "96", "--quiet",
            "--set", "eval.confirm_episodes=2", "--run-dir", str(tmp_path / "r")]
    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(TINY))
    assert main(args) == 0
    rows = read_jsonl(tmp_path / "r" / "metrics.jsonl")
    assert len(rows) == 3
    check_tiled(rows)
    # the windows follow each other without a gap: together they are the run's clock
    assert sum(r["time/window_s"] for r in rows) == pytest.approx(rows[-1]["time/elapsed_s"],
                                                                  abs=1e-4)
    for name in ("collect", "act", "store", "learn", "score", "confirm", "checkpoint", "log"):
        assert all(phase(r, name) > 0 for r in rows), name
    assert all(phase(r, "scripted") == 0 for r in rows)  # no scripted opponents here
    assert phase(rows[0], "evolve") > 0 and phase(rows[-1], "evolve") < 1e-3  # none at the end


def test_a_slow_env_shows_where_envs_step_and_nowhere_else() -> None:
    sleep, horizon, episodes, confirm = 0.01, 5, 2, 2
    cfg = tiny(env={"name": "tests.toy_envs:slow_game",
                    "kwargs": {"horizon": horizon, "sleep_s": sleep}},
               eval={"episodes": episodes, "confirm_episodes": confirm})
    rows = run(cfg)
    assert len(rows) == 2
    check_tiled(rows)
    window = 32  # env steps per window: 2 members x 16, each env.step sleeping
    for r in rows:
        assert phase(r, "collect") >= window * sleep
        # each member's episodes, one env each; the kept member on its confirming episodes
        assert phase(r, "score") >= 2 * episodes * horizon * sleep
        assert phase(r, "confirm") >= confirm * horizon * sleep
        for name in ("act", "store", "learn", "evolve", "log", "checkpoint", "scripted"):
            assert phase(r, name) < window * sleep / 2, (name, phase(r, name))


def test_a_slow_disk_shows_in_checkpoint_not_in_the_phase_that_writes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sleep, saves, at_row = 0.15, [], []
    save = checkpoint.save

    def slow_save(*args: Any, **kwargs: Any) -> None:
        time.sleep(sleep)  # a slow writer: every checkpoint takes this long more
        saves.append(args[0])
        save(*args, **kwargs)

    monkeypatch.setattr(checkpoint, "save", slow_save)
    rows = run(tiny(eval={"confirm_episodes": 2}), tmp_path, lambda: at_row.append(len(saves)))
    check_tiled(rows)
    made = [b - a for a, b in zip([0, *at_row], at_row, strict=False)]
    assert made[0] >= 1 and all(n >= 2 for n in made[1:])  # best.pt each window, latest.pt too
    for r, n in zip(rows, made, strict=True):
        assert phase(r, "checkpoint") >= n * sleep
        assert phase(r, "confirm") < sleep  # best.pt is written while confirming: not its time


@pytest.mark.parametrize("kind", ["matd3", "mappo"])
def test_a_team_game_times_each_teams_learning_and_the_scripted_opponents(kind: str) -> None:
    over: dict[str, Any] = dict(SCRIPTED) if kind == "matd3" else {
        "algo": {"name": "mappo", "rollout": 4}, "games": {"reference_episodes": 2}}
    rows = run(tag_cfg(**over))
    check_tiled(rows, teams=("adversaries", "good"))
    last = rows[-1]
    for team in ("adversaries", "good"):
        assert phase(last, f"learn/{team}") > 0
    assert (phase(last, "scripted") > 0) == (kind == "matd3")
    assert phase(last, "score") > 0  # the matches and the champions against the references


def test_a_resumed_window_keeps_the_phases_it_had_before_its_checkpoint(tmp_path: Path) -> None:
    run_dir = tmp_path / "r"
    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(TINY))
    args = ["train", "--config", str(tmp_path / "tiny.yaml"), "--quiet",
            "--set", "eval.confirm_episodes=2"]
    assert main([*args, "--steps", "80", "--run-dir", str(run_dir)]) == 0  # mid-window
    meta, _ = checkpoint.load(run_dir / "checkpoints" / "latest.pt")
    before = meta["window_phases"]
    assert before["collect"] > 0 and sum(before.values()) <= meta["window_s"]
    assert main(["train", "--resume", str(run_dir), "--steps", "128", "--quiet"]) == 0
    rows = read_jsonl(run_dir / "metrics.jsonl")
    check_tiled(rows)
    again = next(r for r in rows if r["generation"] == meta["generation"])
    assert again["time/window_s"] >= meta["window_s"]
    for name, s in before.items():
        assert phase(again, name) >= s - 1e-6, name
