"""What the console says: a line per generation (not twice across a resume, at a true rate), a
line on what evolution did, and a last line naming the commands that use the run."""

from __future__ import annotations

import shlex
import time
from pathlib import Path
from typing import Any

import pytest

from evohpo import checkpoint
from evohpo.cli import main
from evohpo.logs.evolution import IDS, evolution_line
from tests.test_checkpoint import ARGS, STRATEGIES
from tests.test_trainer import read_jsonl

LOUD = [a for a in ARGS if a != "--quiet"]


def summary_lines(out: str) -> list[str]:
    return [ln for ln in out.splitlines() if ln.startswith("gen ") and "  steps " in ln]


def resume_timed(run: Path, steps: int) -> float:
    """Resume ``run`` up to ``steps``; the wall seconds the resumed session took."""
    t0 = time.perf_counter()
    assert main(["train", "--resume", str(run), "--steps", str(steps)]) == 0
    return time.perf_counter() - t0


def window_s(rows: list[dict[str, Any]], g: int) -> float:
    """Generation ``g``'s window in wall seconds, from its row's rate and env steps."""
    steps = rows[g]["env_steps"] - (rows[g - 1]["env_steps"] if g else 0)
    return steps / rows[g]["time/env_steps_per_s"]


def check_resumed_clock(before: list[dict[str, Any]], after: list[dict[str, Any]],
                        meta: dict[str, Any], wall: float) -> None:
    """The time/* records of a resumed run, bounded on both sides by what was measured.

    The rows the checkpoint kept are as they were. Every row the resumed session writes goes on
    from the checkpoint's clock (not from 0) by no more than the session's wall time. The first
    window's time is its part before the checkpoint plus exactly what this session added to the
    run's clock by then (its rate neither leaves out the time before the checkpoint nor counts
    anything else); each later window counts only its own time, which is most of the time
    between its line and the line before.
    """
    g0 = meta["generation"]
    assert after[:g0] == before[:g0]
    prev = meta["elapsed_s"]
    for r in after[g0:]:
        g, t = r["generation"], r["time/elapsed_s"]
        assert prev <= t <= meta["elapsed_s"] + wall, (g, t, prev, meta["elapsed_s"], wall)
        w = window_s(after, g)
        if g == g0:
            assert w == pytest.approx(meta["window_s"] + t - meta["elapsed_s"], abs=1e-6), g
        else:
            assert (t - prev) / 2 <= w <= t - prev + 1e-6, (g, w, t - prev)
        prev = t


def test_a_resumed_run_does_not_show_its_last_generation_again(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # windows of 200 steps per member (400 for the population): collecting takes most of a
    # window's time, evaluating (2 episodes each) little
    longer = ["--set", "evolution.evo_steps=200"]
    run = tmp_path / "r"
    assert main(["train", *LOUD, *longer, "--steps", "1200", "--run-dir", str(run)]) == 0
    first = summary_lines(capsys.readouterr().out)
    assert [ln.split()[1] for ln in first] == ["0", "1", "2"]
    before = read_jsonl(run / "metrics.jsonl")
    meta, _ = checkpoint.load(run / "checkpoints" / "latest.pt")
    assert meta["env_steps"] == 1200 and meta["window_steps"] == 200  # a whole window's end
    # the resume evaluates generation 2 again and evolves it: its line is not shown twice
    wall = resume_timed(run, 1600)
    again = summary_lines(capsys.readouterr().out)
    assert [ln.split()[1] for ln in again] == ["3"], again
    after = read_jsonl(run / "metrics.jsonl")
    assert [m["generation"] for m in after] == [0, 1, 2, 3]
    # generation 2's rate (written again) counts its window's wall time before the checkpoint,
    # not only the evaluation after the resume; the run's clock goes on from the checkpoint's
    assert meta["window_s"] > 0 and meta["elapsed_s"] >= before[1]["time/elapsed_s"]
    check_resumed_clock(before, after, meta, wall)


def test_a_run_resumed_mid_window_shows_that_generation_when_it_ends(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "r"
    assert main(["train", *LOUD, "--steps", "80", "--run-dir", str(run)]) == 0  # mid-window
    assert summary_lines(capsys.readouterr().out)[-1].split()[:4] == ["gen", "2", "steps", "80"]
    before = read_jsonl(run / "metrics.jsonl")
    meta, _ = checkpoint.load(run / "checkpoints" / "latest.pt")
    wall = resume_timed(run, 128)
    again = summary_lines(capsys.readouterr().out)
    assert [ln.split()[:4] for ln in again] == [["gen", "2", "steps", "96"],
                                                ["gen", "3", "steps", "128"]]
    # the window cut by the budget: its rate counts both sessions' parts of it
    check_resumed_clock(before, read_jsonl(run / "metrics.jsonl"), meta, wall)


def test_evolution_line_says_who_copied_whom_and_what_moved() -> None:
    pbt = [
        {"generation": 3, "member_id": 4, "parent_id": 1, "kind": "hyperparameters",
         "target": "lr_actor,tau", "before": {"lr_actor": 0.001, "tau": 0.01},
         "after": {"lr_actor": 0.0012, "tau": 0.008}, "op": "lr_actor *1.2, tau *0.8",
         "note": "replaces member 3 (fitness -40.000); parent fitness -20.000"},
        {"generation": 3, "member_id": 2, "parent_id": None, "kind": "hyperparameters",
         "target": "batch_size", "before": {"batch_size": 128}, "after": {"batch_size": 256},
         "op": "batch_size resample", "note": "explores in place: fitness -30.000, ..."},
        {"generation": 3, "member_id": 0, "parent_id": None, "kind": "elite",
         "note": "fitness -20.000; kept"},
        {"generation": 3, "member_id": 1, "parent_id": None, "kind": "elite",
         "note": "fitness -21.000; kept"},
    ]
    assert evolution_line(pbt) == (
        "gen    3  evolution: member 4 copies 1 in place of 3 (lr_actor, tau); member 2 explores "
        "in place (batch_size 128 -> 256); kept 0, 1")
    pbt[0]["after"] = {"lr_actor": 0.0012, "tau": 0.008, "gamma": 0.9}  # PBT moves them all
    assert "member 4 copies 1 in place of 3 (3 hyperparameters);" in evolution_line(pbt)
    tournament = [
        {"generation": 0, "member_id": 1, "parent_id": None, "kind": "elite", "note": "..."},
        {"generation": 0, "member_id": 2, "parent_id": 1, "kind": "hyperparameters",
         "target": "lr_actor", "before": 0.001, "after": 0.0008, "op": "*0.8",
         "note": "parent fitness -50.000"},
        {"generation": 0, "member_id": 3, "parent_id": 1, "kind": "weights", "target": "actors",
         "note": "after: L2 norm of the change per agent's actor; parent fitness -50.000"},
        {"generation": 0, "member_id": 4, "parent_id": 0, "kind": "architecture",
         "target": "listener_0/critic/layer1", "before": [64, 64], "after": [64, 80],
         "op": "add_node +16", "note": "parent fitness -60.000", "team": "adversary"},
        {"generation": 0, "member_id": 5, "parent_id": 1, "kind": "none",
         "note": "parent fitness -50.000"},
    ]
    assert evolution_line(tournament) == (
        "gen    0  evolution: member 2 copies 1 (lr_actor 0.001 -> 0.0008); member 3 copies 1 "
        "(actor weights perturbed); adversary member 4 copies 0 (listener_0/critic 64-64 -> "
        "64-80); member 5 copies 1; kept 1")
    # births, members kept, a restored Ray actor: evolution changed nobody
    quiet = [{"generation": 0, "member_id": 0, "parent_id": None, "kind": "birth"},
             {"generation": 0, "member_id": 0, "parent_id": None, "kind": "elite"},
             {"generation": 0, "member_id": 1, "parent_id": None, "kind": "restored"}]
    assert evolution_line(quiet) is None


def test_the_console_shows_evolution_and_the_next_commands_work(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "r"
    # the tournament: every member but the best is a mutated copy, every window
    assert main(["train", *LOUD, *STRATEGIES["tournament"], "--steps", "160",
                 "--run-dir", str(run)]) == 0
    out = capsys.readouterr().out.splitlines()
    lines = [ln for ln in out if "evolution: " in ln]
    records = read_jsonl(run / "lineage.jsonl")
    copies = [r for r in records if r["kind"] not in ("birth", "elite")
              and not r["note"].startswith("explores in place")]
    assert copies and any(r["member_id"] >= 2 for r in copies)  # ids past the population size
    for r in copies:  # every copy is on its generation's line
        line = next(ln for ln in lines if ln.split()[1] == str(r["generation"]))
        assert f"member {r['member_id']} copies {r['parent_id']}" in line, (r, line)
    assert sum(IDS in ln for ln in lines) == 1  # why the ids climb: said once
    # the last line names the commands that use the run, and each of them works
    assert out[-1] == (f"next: evohpo eval {run}; evohpo report {run}; "
                       f"evohpo export {run} --out {run / 'policies'}")
    for command in out[-1].removeprefix("next: ").split("; "):
        argv = shlex.split(command)
        assert argv[0] == "evohpo" and main(argv[1:]) == 0, command
    assert (run / "report.html").is_file() and any((run / "policies").iterdir())
