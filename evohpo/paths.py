"""Where evohpo writes: a run's directory, made ready before a run starts, and output paths
checked before any work, so that a bad output path is one line, not a
traceback after an episode has played or a report was built.

Each check raises :class:`ConfigError` naming the path and what is wrong with it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import time
from pathlib import Path

from evohpo.config import Config
from evohpo.errors import ConfigError

# what a run writes into its directory, beside checkpoints/ (and wandb/)
RUN_FILES = ("config.yaml", "metrics.jsonl", "lineage.jsonl", "system.jsonl", "report.html")


def _probe(d: Path) -> OSError | None:
    """Create and remove a file in directory ``d``: the one sure test of writing there."""
    probe = d / f".evohpo-write-test-{os.getpid()}"
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError as e:
        return e
    os.close(fd)
    with contextlib.suppress(OSError):
        probe.unlink()
    return None


def _why(e: OSError) -> str:
    if e.errno == errno.ENOENT:  # /proc and the like: the directory is there, new files are not
        return "this filesystem does not take new files"
    return e.strerror or type(e).__name__


def _dir_problem(path: Path) -> str | None:
    """Why files cannot be written into directory ``path`` (made if missing), or None: it is not a
    file, and the deepest part of it that exists is a directory this process can write into."""
    if path.exists() and not path.is_dir():
        return "is a file, not a directory"
    base = path
    while not base.exists() and base.parent != base:
        base = base.parent
    if not base.is_dir():
        return f"{str(base)!r} is a file, not a directory"
    failure = _probe(base)
    if failure is not None:
        return f"cannot write in {str(base)!r}: {_why(failure)}"
    return None


def output_dir(path: Path, what: str) -> Path:
    """A directory that ``what`` will create (with its parents) or write files into."""
    problem = _dir_problem(path)
    if problem:
        raise ConfigError(f"{what} {str(path)!r}: {problem}; give a writable directory")
    return path


def output_file(path: Path, what: str, make_parent: bool = False) -> Path:
    """A file that ``what`` will write or replace: not a directory, in a writable directory (made
    here if missing and ``make_parent``), and writable itself if it exists."""
    if path.is_dir():
        raise ConfigError(f"{what} {str(path)!r}: is a directory; give a file name")
    problem = _dir_problem(path.parent)
    if problem:
        raise ConfigError(
            f"{what} {str(path)!r}: {str(path.parent)!r} {problem}"
            if problem.startswith("is a file")
            else f"{what} {str(path)!r}: {problem}"
        )
    try:
        if make_parent:
            path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists():
            with open(path, "ab"):
                pass
    except OSError as e:
        raise ConfigError(f"{what} {str(path)!r}: cannot write this file: {_why(e)}") from None
    return path


def run_dir_writable(run_dir: Path, what: str) -> None:
    """A run directory that ``what`` goes on writing into (logs, checkpoints)."""
    for d in (run_dir, run_dir / "checkpoints"):
        failure = _probe(d) if d.is_dir() else None
        if failure is not None:
            raise ConfigError(
                f"{what} {str(run_dir)!r}: cannot write into {str(d)!r}: "
                f"{_why(failure)}; copy the run somewhere writable"
            )


# ----------------------------------------------------------------------------- run directories

def clear_run_files(path: Path) -> None:
    """Remove what a run writes into its directory (and nothing else)."""
    for name in RUN_FILES:
        (path / name).unlink(missing_ok=True)
    # a replaced run's W&B files would sync as its own, its TensorBoard files show as its own
    for name in ("checkpoints", "wandb", "tensorboard"):
        shutil.rmtree(path / name, ignore_errors=True)


def remove_unstarted(path: Path) -> None:
    """Undo a new run that failed before it started: its files go, and its directory when nothing
    else is in it, so that the same command can simply be run again."""
    clear_run_files(path)
    with contextlib.suppress(OSError):
        path.rmdir()


def prepare_run_dir(path: Path, overwrite: bool) -> Path:
    if path.exists() and not path.is_dir():
        raise ConfigError(f"run directory {str(path)!r} exists and is not a directory")
    if path.is_dir() and any(path.iterdir()):
        if not overwrite:
            raise ConfigError(f"run directory {str(path)!r} already exists; choose another "
                              "--run-dir, or pass --overwrite to replace it")
        failure = _probe(path)  # before anything of the old run is removed
        if failure is not None:
            raise ConfigError(f"run directory {str(path)!r} cannot be replaced: {_why(failure)}; "
                              "choose a writable --run-dir")
        try:
            clear_run_files(path)
        except OSError as e:
            raise ConfigError(f"run directory {str(path)!r} cannot be replaced: "
                              f"{_why(e)} ({e.filename})") from None
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / ".write-test"
        probe.write_text("")
        probe.unlink()
    except OSError as e:
        raise ConfigError(f"run directory {str(path)!r} is not writable: "
                          f"{e.strerror or e}") from None
    return path


def default_run_dir(cfg: Config) -> Path:
    env = cfg.env.name.replace(":", "_").replace("/", "_").replace(".", "_")
    return Path("runs") / f"{env}-{cfg.algo.name}-{time.strftime('%Y%m%d-%H%M%S')}"
