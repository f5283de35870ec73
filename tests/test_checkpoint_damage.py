"""Damaged checkpoints: every change is refused, and the line names what is kept instead in the
generations the console and the logs count."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from evohpo import checkpoint
from evohpo.cli import main
from tests.test_checkpoint import spoil, train
from tests.test_trainer import read_jsonl

# windows of 32 env steps: generations 0, 1 and 2 end at 32, 64 and 96; the budget ends at 100,
# inside generation 3's window, which its final evaluation scores
STEPS, PREV_STEPS, PREV_GEN = 100, 96, 2


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = tmp_path_factory.mktemp("trained") / "r"
    assert train(run, STEPS) == 0
    return run


@pytest.fixture
def run(trained: Path, tmp_path: Path) -> Path:
    shutil.copytree(trained, tmp_path / "r")
    return tmp_path / "r"


def one_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    return err.strip()


# ----------------------------------------------------------------------------- numbering

def test_a_damaged_checkpoint_names_the_previous_one_by_the_consoles_generation(
        run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """latest.prev.pt and best.prev.pt hold the same moment (96 env steps): both are called by
    the generation that metrics.jsonl, lineage.jsonl and the console give it."""
    ckpts = run / "checkpoints"
    rows = {r["env_steps"]: r["generation"] for r in read_jsonl(run / "metrics.jsonl")}
    assert rows[PREV_STEPS] == PREV_GEN and rows[STEPS] == PREV_GEN + 1
    assert any(r["generation"] == PREV_GEN for r in read_jsonl(run / "lineage.jsonl"))
    at = f"(generation {PREV_GEN}, {PREV_STEPS:,} env steps)"
    for name, cmd in (("latest", ["train", "--resume", str(run), "--steps", "200", "--quiet"]),
                      ("best", ["eval", str(run), "--episodes", "1"])):
        path = ckpts / f"{name}.pt"
        assert checkpoint.load(ckpts / f"{name}.prev.pt")[0]["env_steps"] == PREV_STEPS
        spoil(path, 64, np.random.default_rng(0))
        assert main(cmd) == 2
        assert f"'{ckpts / name}.prev.pt' {at} is intact" in one_line(capsys)
    # the last checkpoint (the budget's end) is the moment of the console's last line
    assert checkpoint.moment(checkpoint.load(ckpts / "latest.prev.pt")[0]) == (
        f"generation {PREV_GEN}, {PREV_STEPS:,} env steps")
    shutil.copy(ckpts / "latest.prev.pt", ckpts / "latest.pt")
    assert main(["train", "--resume", str(run), "--steps", "128"]) == 0
    out = capsys.readouterr()
    assert f"resuming from generation {PREV_GEN}, {PREV_STEPS:,} env steps\n" in out.out + out.err
    assert f"gen {PREV_GEN + 1:>4}  steps {128:>10,}" in out.out + out.err  # the next line


def test_a_checkpoint_taken_inside_a_window_is_partway_through_its_generation(
        trained: Path) -> None:
    """The budget's end, before its generation's line, is that line's generation; a checkpoint
    taken inside a window (an interrupt) is partway through the generation it will log."""
    meta = checkpoint.load(trained / "checkpoints" / "latest.pt")[0]
    assert meta["budget_end"] and meta["window_steps"] > 0
    assert checkpoint.moment(meta) == f"generation {PREV_GEN + 1}, {STEPS:,} env steps"
    assert checkpoint.moment({**meta, "budget_end": False}) == (
        f"partway through generation {PREV_GEN + 1}, {STEPS:,} env steps")
    best = checkpoint.load(trained / "checkpoints" / "best.pt")[0]  # taken after the line
    assert checkpoint.moment(best) == f"generation {PREV_GEN + 1}, {STEPS:,} env steps"


# ----------------------------------------------------------------------------- what is there

@pytest.mark.parametrize("name", ["best", "latest"])
def test_a_directory_in_place_of_a_checkpoint_says_so_and_names_the_previous_one(
        run: Path, name: str, capsys: pytest.CaptureFixture[str]) -> None:
    ckpts = run / "checkpoints"
    path, prev = ckpts / f"{name}.pt", ckpts / f"{name}.prev.pt"
    path.unlink()
    path.mkdir()
    cmd = (["eval", str(run), "--episodes", "1"] if name == "best"
           else ["train", "--resume", str(run), "--steps", "200", "--quiet"])
    assert main(cmd) == 2
    assert one_line(capsys) == (
        f"evohpo: error: checkpoint '{path}' is a directory, not a checkpoint file; the previous "
        f"checkpoint '{prev}' (generation {PREV_GEN}, {PREV_STEPS:,} env steps) is intact: move "
        f"{name}.pt aside and put a copy of it in its place to go on from there")
    path.rename(ckpts / "aside")  # what the line says to do
    shutil.copy(prev, path)
    assert main(cmd) == 0
    capsys.readouterr()
    shutil.rmtree(ckpts / "aside")
    path.unlink()
    path.mkdir()
    prev.unlink()
    assert main(cmd) == 2
    assert one_line(capsys).endswith(
        f"'{path}' is a directory, not a checkpoint file; no earlier checkpoint of it is kept")
