"""Off the shipped path: the version, torn run files, read-only run directories, and env
factories in a local file."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

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
