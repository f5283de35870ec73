"""Where evohpo writes: a run's directory, made ready before a run starts (or a resume: its
config.yaml checked against its checkpoint, its logs cut back to it and put back if it trains
nothing), and output paths checked before any work, so that a bad output path is one line, not a
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
from typing import Any

from evohpo.config import Config, read_yaml, to_dict
from evohpo.errors import ConfigError
from evohpo.logs.loggers import atomic_write_bytes

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


def _flat(d: Any, pre: str = "") -> dict[str, Any]:
    if not isinstance(d, dict):
        return {pre[:-1]: d}
    return {k: v for key, sub in d.items() for k, v in _flat(sub, f"{pre}{key}.").items()}


# what a resume may set differently from the checkpoint: the budget and where and how it logs
_MAY_CHANGE = ("steps", "logging.", "distributed.", "device")


def same_config(path: Path, cfg: Config, saved: Any) -> None:
    """A run's config.yaml, edited by hand or cut short, against the config its checkpoint
    was trained with: any difference that the checkpoint cannot follow is one line."""
    if not isinstance(saved, dict):
        return
    now, then = _flat(to_dict(cfg)), _flat(saved)
    changed = [k for k in then if k in now and now[k] != then[k]
               and not k.startswith(_MAY_CHANGE)]
    if not changed:
        return
    cut_short(path, saved)
    k = changed[0]
    raise ConfigError(
        f"{str(path / 'config.yaml')!r} no longer matches the run's checkpoint: {k} is "
        f"{now[k]!r}, the checkpoint was trained with {then[k]!r}"
        + (f" (and {len(changed) - 1} more keys)" if len(changed) > 1 else "")
        + "; put the file back as the run wrote it, or start a new run")


def cut_short(path: Path, saved: Any = None) -> None:
    """Raise if the run's config.yaml lacks top-level sections its checkpoint's config has."""
    from evohpo import checkpoint

    try:
        raw = read_yaml(path / "config.yaml")
        saved = saved if saved is not None else checkpoint.load_latest(path)[0].get("config")
    except Exception:  # no file or no checkpoint: the caller's own error says so
        return
    if not isinstance(saved, dict) or not isinstance(raw, dict):
        return
    if lost := [k for k in saved if k not in raw and not f"{k}.".startswith(_MAY_CHANGE)]:
        raise ConfigError(f"{str(path / 'config.yaml')!r} looks cut short: it has no "
                          f"{', '.join(lost)} section{'s' if len(lost) > 1 else ''}, which the "
                          "run's checkpoint was trained with; put the file back as the run "
                          "wrote it, or start a new run")


class ResumedFiles:
    """A resumed run's logs cut back to its checkpoint (the lines written after it go: a crash
    between log and checkpoint, or the final evaluation of a budget the resume extends), with
    what was there kept aside: a resume that trains nothing (it failed before its first step:
    W&B without a login, a runtime that cannot start) puts every record back as it was."""

    def __init__(self, run_dir: Path, sizes: dict[str, int]):
        from evohpo import checkpoint

        self.run_dir = run_dir
        self.tails = {name: _bytes(run_dir / name)[size:] for name, size in sizes.items()}
        self.config = _bytes(run_dir / "config.yaml")
        self.system = _size(run_dir / "system.jsonl")
        self.latest = _stamp(run_dir / "checkpoints" / "latest.pt")
        self.events = set((run_dir / "tensorboard").glob("*"))
        checkpoint.truncate_run_files(run_dir, sizes)
        self.cut = {name: _size(run_dir / name) for name in sizes}

    def trained_nothing(self) -> bool:
        """No line logged and no checkpoint written since the cut."""
        return (_stamp(self.run_dir / "checkpoints" / "latest.pt") == self.latest
                and all(_size(self.run_dir / n) == size for n, size in self.cut.items()))

    def put_back(self) -> None:
        """Every file as it was before the resume, if the resume trained nothing."""
        if not self.trained_nothing():
            return
        d = self.run_dir
        for name, tail in self.tails.items():
            if tail:
                atomic_write_bytes(d / name, _bytes(d / name) + tail)
        if self.config:
            atomic_write_bytes(d / "config.yaml", self.config)
        if _size(d / "system.jsonl") > self.system:  # this session's line: it trained nothing
            with open(d / "system.jsonl", "r+b") as f:
                f.truncate(self.system)
        for p in set((d / "tensorboard").glob("*")) - self.events:  # its event file
            with contextlib.suppress(OSError):
                p.unlink()


def _bytes(path: Path) -> bytes:
    return path.read_bytes() if path.is_file() else b""


def _size(path: Path) -> int:
    return path.stat().st_size if path.is_file() else 0


def _stamp(path: Path) -> tuple[int, int, int] | None:
    """What changes when a file is replaced or written: inode, size, modification time."""
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns


