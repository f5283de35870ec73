"""SIGTERM (kill, schedulers, containers) stops a run as the first Ctrl-C does: a checkpoint, a
clean exit with the resume command, and the resumed run goes on from there."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

from evohpo import checkpoint
from evohpo.cli import main
from tests.test_checkpoint import ARGS


def test_sigterm_checkpoints_and_resumes(tmp_path: Path) -> None:
    run = tmp_path / "run"
    cmd = [
        sys.executable,
        "-m",
        "evohpo",
        "train",
        *ARGS,
        "--set",
        "evolution.evo_steps=600",
        "--steps",
        "100000",
        "--run-dir",
        str(run),
    ]
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).parent.parent,
    )
    latest = run / "checkpoints" / "latest.pt"
    deadline = time.time() + 60
    while not latest.exists() and time.time() < deadline:
        time.sleep(0.05)
    first = checkpoint.load(latest)[0]["env_steps"]
    time.sleep(0.3)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "Traceback" not in err and f"evohpo train --resume {run}" in err
    meta, _ = checkpoint.load(latest)
    assert f"interrupted at {meta['env_steps']:,} env steps; checkpoint saved" in err
    assert first < meta["env_steps"] < 100_000  # written when the signal came, not the window's one
    assert (
        main(["train", "--resume", str(run), "--steps", str(meta["env_steps"] + 8), "--quiet"]) == 0
    )
