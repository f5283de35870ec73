"""What the console says: a line per generation (not twice across a resume, at a true rate), a
line on what evolution did, and a last line naming the commands that use the run."""

from __future__ import annotations

import dataclasses
import shlex
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from evohpo import checkpoint
from evohpo.cli import main
from evohpo.evolve.evolution import next_generation
from evohpo.logs.evolution import IDS, evolution_line
from tests.test_checkpoint import ARGS, STRATEGIES
from tests.test_trainer import read_jsonl

LOUD = [a for a in ARGS if a != "--quiet"]
NAN = float("nan")


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


# what the strategies below may move: lr_actor alone, by 1.2 (members start at 0.001, or pinned
# at its bound 0.01 where nothing may move); every other hyperparameter stays
ONE_HP = {k: {"mutate": k == "lr_actor"}
          for k in ("lr_actor", "lr_critic", "batch_size", "learn_step", "tau", "expl_noise")}


def strategy_line(strategy: str, fitness: list[float], se: float = 0.0,
                  diverged: tuple[int, ...] = (), pinned: bool = False, every_hp: bool = False,
                  **ev: Any) -> str | None:
    """The console's line on one generation of a real strategy (generation 3, next id 50) over
    members 100, 101, ... (slot order) with known fitness."""
    from tests.test_hpo import MID, ecfg, mcfg, population

    hp = dataclasses.replace(MID, lr_actor=1e-2) if pinned else MID
    mut = mcfg(factors=[1.2], **({} if every_hp else {"bounds": ONE_HP}))
    members = population(len(fitness), diverged, hp)
    out = next_generation(members, fitness, [se] * len(fitness), 3, 50,
                          ecfg(strategy=strategy, resample_probability=0.0, **ev), mut,
                          np.random.default_rng(0))
    return evolution_line([r.to_json() for r in out.records])


def test_every_record_a_strategy_makes_has_its_line() -> None:
    """Each strategy's records as the console prints them, on known answers: copies (over a
    worse member, in place of a diverged one), explorations, and changes of none, one, two or
    every hyperparameter."""
    gen = "gen    3  evolution: "
    kept = "; kept 101, 102, 103"
    pbt = {"strategy": "truncation", "ready": 1, "quantile": 0.25}
    # PBT: the bottom member (100) copies the top one (103), then explores
    assert strategy_line(fitness=[0.0, 1.0, 2.0, 3.0], **pbt) == (
        gen + "member 50 copies 103 in place of 100 (lr_actor 0.001 -> 0.0012)" + kept)
    assert strategy_line(fitness=[0.0, 1.0, 2.0, 3.0], pinned=True, **pbt) == (
        gen + "member 50 copies 103 in place of 100" + kept)
    assert strategy_line(fitness=[0.0, 1.0, 2.0, 3.0], every_hp=True, **pbt) == (
        gen + "member 50 copies 103 in place of 100 (6 hyperparameters)" + kept)
    # ... in place of a diverged member (101), whatever its fitness
    assert strategy_line(fitness=[0.0, NAN, 2.0, 3.0], diverged=(1,), **pbt) == (
        gen + "member 50 copies 103 in place of 101 (lr_actor 0.001 -> 0.0012); "
        "kept 100, 102, 103")
    # within the noise of the member it would copy: it explores in place, keeping its id
    assert strategy_line(fitness=[0.0, 1.0, 2.0, 3.0], se=10.0, explore_kept=True, **pbt) == (
        gen + "member 100 explores in place (lr_actor 0.001 -> 0.0012)" + kept)
    assert strategy_line(fitness=[0.0, 1.0, 2.0, 3.0], se=10.0, explore_kept=True, pinned=True,
                         **pbt) == gen + "member 100 explores in place (nothing moved)" + kept
    assert strategy_line(fitness=[0.0, 1.0, 2.0, 3.0], se=10.0, explore_kept=False, **pbt) is None
    # the tournament: the elite (101) is kept, every other slot is a mutated copy
    tour = {"strategy": "tournament", "tournament_size": 3}
    assert strategy_line(fitness=[1.0, 3.0, 2.0], **tour) == (
        gen + "member 50 copies 101 (lr_actor 0.001 -> 0.0012); member 51 copies 101 "
        "(lr_actor 0.001 -> 0.0012); kept 101")
    assert strategy_line(fitness=[1.0, 3.0, 2.0], pinned=True, **tour) == (
        gen + "member 50 copies 101; member 51 copies 101; kept 101")
    # ... a diverged member (101, the highest score) is no parent: the best healthy one is
    assert strategy_line(fitness=[1.0, 9.0, 2.0], diverged=(1,), **tour) == (
        gen + "member 50 copies 102 (lr_actor 0.001 -> 0.0012); member 51 copies 102 "
        "(lr_actor 0.001 -> 0.0012); kept 102")
    # independent members: only a diverged one is replaced, by a copy of the best healthy one
    assert strategy_line(fitness=[1.0, NAN, 2.0], diverged=(1,), strategy="independent") == (
        gen + "member 50 copies 102 in place of 101; kept 100, 102")
    assert strategy_line(fitness=[1.0, 3.0, 2.0], strategy="independent") is None


def test_every_mutation_a_copy_can_carry_has_its_line() -> None:
    """A tournament's copy carries one operator's record, as the operators write them (weights,
    architecture, activation, and an operator that could not apply), on one team or several."""
    def rec(kind: str, **kw: Any) -> dict[str, Any]:
        return {"generation": 7, "member_id": 9, "parent_id": 4, "kind": kind, "target": "",
                "before": None, "after": None, "op": "", "note": "parent fitness -5.000", **kw}

    elite = {"generation": 7, "member_id": 4, "parent_id": 1, "kind": "elite",
             "note": "fitness -5.000"}
    lines = {
        "actor weights perturbed": rec(
            "weights", target="actors", after={"speaker_0": 0.01, "listener_0": 0.02},
            op="gaussian std=0.1 frac=0.1",
            note="after: L2 norm of the change per agent's actor; parent fitness -5.000"),
        "listener_0/actor 64-64 -> 64-64-64": rec(
            "architecture", target="listener_0/actor/layer2", before=[64, 64],
            after=[64, 64, 64], op="add_layer"),
        "speaker_0/critic 64 -> 48": rec(
            "architecture", target="speaker_0/critic/layer0", before=[64], after=[48],
            op="remove_node -16", note="both twin critics; parent fitness -5.000"),
        "speaker_0 activation relu -> tanh": rec(
            "activation", target="speaker_0/actor+critic", before="relu", after="tanh",
            op="set_activation"),
        "batch_size 128 -> 154": rec("hyperparameters", target="batch_size", before=128,
                                     after=154, op="*1.2"),
        "": rec("none", note="architecture: drew add_layer on listener_0/actor (at "
                             "mutation.arch.max_layers); no operator applies to any network "
                             "within mutation.arch; parent fitness -5.000"),
    }
    for what, r in lines.items():
        said = f" ({what})" if what else ""
        assert evolution_line([elite, r]) == (
            f"gen    7  evolution: member 9 copies 4{said}; kept 4"), what
    # games of several teams: each member and each kept one names its team
    teams = [{**elite, "team": "adversary"}, {**elite, "member_id": 2, "team": "agent"},
             {**lines["speaker_0 activation relu -> tanh"], "team": "agent"}]
    assert evolution_line(teams) == ("gen    7  evolution: agent member 9 copies 4 "
                                     "(speaker_0 activation relu -> tanh); kept adversary 4, "
                                     "agent 2")


def test_the_first_line_with_a_copy_says_why_ids_climb(
        capsys: pytest.CaptureFixture[str]) -> None:
    """The console's lines as printed: an exploration alone takes no new id; the first copy's
    line says why ids run past the population size, and no later line says it again."""
    from evohpo.logs.loggers import ConsoleLogger

    def copy(g: int, new: int, old: int) -> list[dict[str, Any]]:
        return [{"generation": g, "member_id": new, "parent_id": 0, "kind": "none",
                 "note": f"replaces member {old} (fitness -9.000); parent fitness -1.000"}]

    log = ConsoleLogger(total=1000)
    log.lineage([{"generation": 1, "member_id": 1, "parent_id": None, "kind": "none",
                  "note": "explores in place: fitness -2.000, within the noise of member 0"}])
    log.lineage(copy(2, 2, 1))
    log.lineage(copy(3, 3, 2))
    assert capsys.readouterr().out.splitlines() == [
        "gen    1  evolution: member 1 explores in place (nothing moved)",
        f"gen    2  evolution: member 2 copies 0 in place of 1 ({IDS})",
        "gen    3  evolution: member 3 copies 0 in place of 2"]


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
