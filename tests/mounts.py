"""Real filesystems for fault tests: a small tmpfs (a full disk) and a read-only directory.

Both need root (mount) or, for read-only, a user whom file permissions stop; otherwise the
test that asks for one is skipped, saying why.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


def _mount(*args: str) -> str | None:
    """Run mount/umount; None when it worked, else why not."""
    try:
        proc = subprocess.run(list(args), capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        return str(e)
    return None if proc.returncode == 0 else (proc.stderr.strip() or f"exit code {proc.returncode}")


@contextlib.contextmanager
def small_fs(path: Path, size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` (e.g. '256k') at ``path``: writes past it meet a full disk."""
    path.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        pytest.skip("a small filesystem needs root to mount a tmpfs")
    why = _mount("mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path))
    if why:
        pytest.skip(f"cannot mount a tmpfs here: {why}")
    try:
        yield path
    finally:
        _mount("umount", "-l", str(path))


def _writable(path: Path) -> bool:
    probe = path / ".probe"
    try:
        probe.write_text("")
    except OSError:
        return False
    probe.unlink()
    return True


@contextlib.contextmanager
def read_only(path: Path) -> Iterator[Path]:
    """``path`` (a directory, with what it holds) made read-only: permissions where they stop
    this user, else (root) a read-only bind mount over it."""
    modes = {p: p.stat().st_mode for p in [path, *path.rglob("*")] if p.is_dir()}
    for p in modes:
        p.chmod(0o555)
    if not _writable(path):
        try:
            yield path
        finally:
            for p, mode in modes.items():
                p.chmod(mode)
        return
    for p, mode in modes.items():
        p.chmod(mode)
    why = _mount("mount", "--bind", str(path), str(path)) or _mount(
        "mount", "-o", "remount,ro,bind", str(path)
    )
    if why:
        _mount("umount", "-l", str(path))
        pytest.skip(f"cannot make a read-only directory here: {why}")
    try:
        yield path
    finally:
        _mount("umount", "-l", str(path))
