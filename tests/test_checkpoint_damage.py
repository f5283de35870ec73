"""Damaged checkpoints: every change is refused, and the line names what is kept instead in the
generations the console and the logs count."""

from __future__ import annotations

import json
import math
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

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


# ----------------------------------------------------------------------------- the checksum

Tree = Any


def nodes(tree: Tree, at: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], Tree]]:
    """Every node of nested dicts, lists and tuples (the containers too), with its path."""
    yield at, tree
    if isinstance(tree, dict):
        for k, v in tree.items():
            yield from nodes(v, (*at, k))
    elif isinstance(tree, (list, tuple)):
        for i, v in enumerate(tree):
            yield from nodes(v, (*at, i))


def replaced(tree: Tree, at: tuple[Any, ...], change: Callable[[Any], Any]) -> Tree:
    """A copy of ``tree`` with the node at ``at`` changed (only the containers above it copied)."""
    if not at:
        return change(tree)
    if isinstance(tree, dict):
        return {**tree, at[0]: replaced(tree[at[0]], at[1:], change)}
    out = list(tree)
    out[at[0]] = replaced(tree[at[0]], at[1:], change)
    return type(tree)(out)


def nudged(x: Any) -> Any:
    """``x`` changed slightly: a float by 1e-6 (or by the least step of its precision where that
    is smaller than 1e-6 can show), an integer by 1, a flag flipped, a string by a letter, None
    made 0; in a tensor, its last element."""
    if isinstance(x, torch.Tensor):
        t = x.clone().reshape(-1)
        if t.dtype == torch.bool:
            t[-1] = ~t[-1]
        elif t.dtype.is_floating_point:
            v = (t[-1].double() + 1e-6).to(t.dtype)
            up = torch.tensor(math.inf, dtype=t.dtype)
            t[-1] = v if v != t[-1] else torch.nextafter(t[-1], up)
        else:
            t[-1] = t[-1] ^ 1
        return t.reshape(x.shape)
    if isinstance(x, bool):
        return not x
    if isinstance(x, float):
        return x + 1e-6 if x + 1e-6 != x else math.nextafter(x, math.inf)
    if isinstance(x, int):
        return x + 1
    if isinstance(x, str):
        return x[:-1] + ("a" if x[-1:] != "a" else "b")
    assert x is None, type(x)
    return 0


def changes(obj: dict[str, Any]) -> Iterator[tuple[str, tuple[Any, ...], Any, dict[str, Any]]]:
    """The checkpoint ``obj`` (as torch's reader gives it) with one part changed, for every part:
    each value in its tensors (each tensor, number, string, in dicts and lists at any depth) and
    in its metadata. Yields (section, path, the part, the changed checkpoint)."""
    for at, node in nodes(obj["tensors"]):
        if not isinstance(node, (dict, list, tuple)):
            assert not isinstance(node, torch.Tensor) or node.numel() > 0, at  # one to change
            yield "tensors", at, node, {**obj, "tensors": replaced(obj["tensors"], at, nudged)}
    meta = json.loads(obj["meta"])
    assert json.dumps(meta) == obj["meta"]  # re-written, only the changed value differs
    for at, node in nodes(meta):
        if not isinstance(node, (dict, list)):
            yield "meta", at, node, {**obj, "meta": json.dumps(replaced(meta, at, nudged))}


def kind(section: str, node: Any) -> tuple[str, str]:
    """Where a part is (tensors or metadata) and what type of value it is."""
    return section, str(node.dtype) if isinstance(node, torch.Tensor) else type(node).__name__


def refused(obj: dict[str, Any], where: Path) -> str:
    """The error ``checkpoint.load`` gives ``obj`` written to ``where`` ("" if it loads)."""
    torch.save(obj, where)
    try:
        checkpoint.load(where)
    except checkpoint.CheckpointError as e:
        return str(e)
    return ""


@pytest.mark.parametrize("on_disk", ["each kind", pytest.param("all", marks=pytest.mark.slow)])
def test_a_change_anywhere_in_a_checkpoint_is_refused(
        trained: Path, tmp_path: Path, on_disk: str) -> None:
    """Every part of latest.pt and best.pt changed alone, slightly: the checksum no longer
    matches. Written in the checkpoint's format and loaded, it is refused in one line: the first
    change of each kind (each type of value in its tensors and in its metadata; ``all``: every
    change, some minutes)."""
    where, kinds = tmp_path / "x.pt", set[tuple[str, str]]()
    for name in ("latest", "best"):
        obj = torch.load(trained / "checkpoints" / f"{name}.pt", weights_only=True)
        assert obj["checksum"] == checkpoint.digest(obj["meta"], obj["tensors"])
        torch.save(obj, where)
        checkpoint.load(where)  # written again unchanged, it loads
        missed, loaded, n = [], [], 0
        for section, at, node, changed in changes(obj):
            n += 1
            if checkpoint.digest(changed["meta"], changed["tensors"]) == obj["checksum"]:
                missed.append(f"{section}{list(at)}")
            if on_disk == "all" or n == 1 or kind(section, node) not in kinds:
                kinds.add(kind(section, node))
                if refused(changed, where) != (
                        f"checkpoint '{where}' is damaged or truncated and cannot be read (its "
                        "content does not match the checksum written with it); no earlier "
                        "checkpoint of it is kept"):
                    loaded.append(f"{section}{list(at)}")
        assert not missed, f"{name}.pt: {len(missed)} of {n} changes pass the checksum: {missed}"
        assert not loaded, f"{name}.pt: changed, these load from disk: {loaded}"
        assert n > (800 if name == "latest" else 300), n
    assert len(kinds) >= 10, kinds
