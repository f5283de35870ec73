"""A full disk while checkpointing: reported, the previous checkpoint intact, no temp file left,
and training goes on. On a real small filesystem, and with the fault injected at the writer."""

from __future__ import annotations

import errno
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from evohpo import checkpoint
from evohpo import config as C
from evohpo.loop.trainer import Trainer
from tests.mounts import small_fs
from tests.test_faults import Messages
from tests.test_trainer import TINY


def leftovers(d: Path) -> list[Path]:
    return sorted(d.glob(".*.tmp-*"))


def test_save_on_a_full_filesystem(tmp_path: Path) -> None:
    with small_fs(tmp_path / "fs", "256k") as fs:
        path = fs / "latest.pt"
        checkpoint.save(path, {"i": 0}, {"x": torch.zeros(1000)})
        # torch's writer meets the full disk as RuntimeError "unexpected pos", not OSError
        with pytest.raises(checkpoint.CheckpointError, match="no space left on the device") as info:
            checkpoint.save(path, {"i": 1}, {"x": torch.zeros(200_000)})
        assert "the previous checkpoint is intact" in str(info.value)
        assert leftovers(fs) == []
        meta, tensors = checkpoint.load(path)
        assert meta == {"i": 0} and tensors["x"].shape == (1000,)


def test_training_goes_on_when_the_disk_fills(tmp_path: Path) -> None:
    # checkpoints grow with the replay memory: the first ones fit, later ones do not
    cfg = C.load(
        [TINY, {"steps": 1600, "evolution": {"evo_steps": 200}, "buffer": {"capacity": 5000}}]
    )
    with small_fs(tmp_path / "fs", "640k") as fs:
        log = Messages()
        t = Trainer(cfg, log, fs)
        try:
            t.train()
        finally:
            t.close()
        assert t.env_steps == 1600 and len(log.metrics) == 4  # every generation ran
        full = [m for m in log.messages if "no space left on the device" in m]
        assert full and all(m.startswith("warning: could not write checkpoint") for m in full)
        assert leftovers(fs / "checkpoints") == []
        meta, _ = checkpoint.load(fs / "checkpoints" / "latest.pt")
        assert 0 < meta["env_steps"] < 1600  # the last one that fitted


@pytest.mark.parametrize(
    "fault",
    [
        RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 832 vs 726"),
        OSError(errno.ENOSPC, "No space left on device"),
    ],
)
def test_writer_fault_mid_write(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, fault: Exception
) -> None:
    """The writer fails after part of the file is out: the trainer warns and goes on."""
    real_save = torch.save
    calls = {"n": 0}

    def failing_save(obj: Any, f: Any, *a: Any, **k: Any) -> None:
        calls["n"] += 1
        if calls["n"] >= 3:  # the first checkpoints fit, then the disk is full
            f.write(b"PK\x03\x04" + bytes(4096))
            raise fault
        real_save(obj, f, *a, **k)

    monkeypatch.setattr(torch, "save", failing_save)
    log = Messages()
    t = Trainer(C.load([TINY, {"steps": 96}]), log, tmp_path)
    try:
        t.train()
    finally:
        t.close()
    assert t.env_steps == 96  # training went on
    warned = [m for m in log.messages if "could not write checkpoint" in m]
    assert warned and all("previous checkpoint is intact" in m for m in warned)
    meta, _ = checkpoint.load(tmp_path / "checkpoints" / "latest.pt")
    assert meta["env_steps"] < 96
    assert leftovers(tmp_path / "checkpoints") == []


def test_interrupted_write_leaves_no_temp_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    def interrupted(obj: Any, f: Any, *a: Any, **k: Any) -> None:
        f.write(bytes(4096))
        raise KeyboardInterrupt

    monkeypatch.setattr(torch, "save", interrupted)
    with pytest.raises(KeyboardInterrupt):
        checkpoint.save(tmp_path / "latest.pt", {}, {})
    assert leftovers(tmp_path) == [] and not (tmp_path / "latest.pt").exists()


def test_temp_file_of_a_killed_writer_is_removed(tmp_path: Path) -> None:
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    stale = tmp_path / f".latest.pt.tmp-{int(gone.stdout)}"
    stale.write_bytes(bytes(1000))  # what kill -9 in the middle of a write leaves
    checkpoint.save(tmp_path / "latest.pt", {"i": 1}, {})
    assert leftovers(tmp_path) == []
    assert checkpoint.load(tmp_path / "latest.pt")[0] == {"i": 1}


def test_empty_checkpoint_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "latest.pt").write_bytes(b"")
    with pytest.raises(checkpoint.CheckpointError, match=r"is empty \(0 bytes\)"):
        checkpoint.load(tmp_path / "latest.pt")
