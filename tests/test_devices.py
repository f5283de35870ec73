"""What ``device: auto`` picks (evohpo.devices): a GPU only at network sizes where it pays."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from evohpo import config as C
from evohpo.devices import AUTO_GPU_WORK, gpu_pays, resolve_device, wants_gpu
from evohpo.loop.trainer import Trainer
from tests.test_faults import Messages
from tests.test_trainer import TINY


def cfg_of(device: str = "auto", hidden: list[int] | None = None, batch: int = 256) -> C.Config:
    return C.load([{"device": device, "algo": {"hidden": hidden or [64, 64], "batch_size": batch}}])


@pytest.mark.parametrize(("hidden", "batch", "pays"), [
    ([64, 64], 256, False),      # the presets: the CPU trains them 2.2x faster
    ([128, 128], 256, False),    # an update is level, acting is faster on the CPU
    ([64, 64], 1024, False),     # likewise
    ([128, 128], 512, False),
    ([256, 256], 256, True),     # the GPU trains it 1.2x faster
    ([128, 128], 1024, True),    # an update as dear as at 256 wide, batches of 256
    ([128, 512, 64], 128, True),  # the widest layer counts
])
def test_auto_takes_a_gpu_from_a_measured_size(monkeypatch: pytest.MonkeyPatch,
                                               hidden: list[int], batch: int, pays: bool) -> None:
    assert (max(hidden) ** 2 * batch >= AUTO_GPU_WORK) is pays
    cfg = cfg_of(hidden=hidden, batch=batch)
    assert gpu_pays(cfg) is pays and wants_gpu(cfg) is pays
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert resolve_device(cfg).type == ("cuda" if pays else "cpu")
    # cpu and cuda are taken as named, whatever the size
    assert resolve_device(cfg_of("cpu", hidden, batch)).type == "cpu"
    assert resolve_device(cfg_of("cuda", hidden, batch)).type == "cuda"
    assert wants_gpu(cfg_of("cuda", hidden, batch)) and not wants_gpu(cfg_of("cpu", hidden, batch))
    # no GPU: auto is the CPU at any size
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_device(cfg).type == "cpu"


def test_a_gpu_left_unused_by_auto_is_said(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    log = Messages()
    t = Trainer(C.load([TINY, {"device": "auto"}]), log, tmp_path / "run")
    try:
        assert t.runtime.device.type == "cpu"
        said = [m for m in log.messages if m.startswith("device auto: the CPU")]
        assert len(said) == 1 and "16 units wide and batches of 8" in said[0]
        assert "--set device=cuda" in said[0]
    finally:
        t.close()
    # a run that named its device hears nothing of it
    log = Messages()
    t = Trainer(C.load([TINY, {"device": "cpu"}]), log, tmp_path / "run2")
    try:
        assert not [m for m in log.messages if m.startswith("device auto")]
    finally:
        t.close()
