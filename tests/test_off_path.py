"""Off the shipped path: the version, torn run files, read-only run directories, and env
factories in a local file."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.mounts import read_only
from tests.test_checkpoint import train

ROOT = Path(__file__).resolve().parents[1]


def evohpo_cli(*args: str, cwd: Path | None = None,
               env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "evohpo", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def test_version_prints_the_package_version() -> None:
    from evohpo.version import __version__

    proc = evohpo_cli("--version", env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"evohpo {__version__}"


def test_overwrite_into_a_read_only_run_directory_is_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "run"
    assert train(run, 32) == 0
    before = sorted(p.name for p in run.iterdir())
    with read_only(run):
        capsys.readouterr()
        assert train(run, 32, "--overwrite") == 2
        err = capsys.readouterr().err
        assert err.startswith(f"evohpo: error: run directory {str(run)!r}")
        assert "read-only" in err.lower() and len(err.strip().splitlines()) == 1
    assert sorted(p.name for p in run.iterdir()) == before  # nothing was cleared
