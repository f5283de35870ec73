"""Versioned, atomic checkpoints of a whole run: tensors plus JSON metadata, no pickled classes.

A checkpoint file holds ``{"format", "version", "meta": <JSON text>, "tensors": <nested dicts
and lists of tensors and numbers>}`` and is read with ``torch.load(weights_only=True)``, which
refuses anything but tensors and plain containers. So a checkpoint loads in a later evohpo, or
says clearly why it cannot. Writes go to a temporary file that is fsynced and then renamed over
the old one: a crash or ``kill -9`` at any moment leaves the previous checkpoint intact.
"""

from __future__ import annotations

import contextlib
import json
import os
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from evohpo.errors import EvohpoError

FORMAT = "evohpo-checkpoint"
VERSION = 1


class CheckpointError(EvohpoError):
    exit_code = 2


def map_tree(obj: Any, leaf: Callable[[Any], Any], tuples_as_lists: bool = False) -> Any:
    """``leaf`` applied to every leaf of nested dicts, lists and tuples."""
    if isinstance(obj, dict):
        return {k: map_tree(v, leaf, tuples_as_lists) for k, v in obj.items()}
    if isinstance(obj, list) or (tuples_as_lists and isinstance(obj, tuple)):
        return [map_tree(v, leaf, tuples_as_lists) for v in obj]
    if isinstance(obj, tuple):
        return tuple(map_tree(v, leaf) for v in obj)
    return leaf(obj)


def _tensor(x: Any) -> Any:
    if isinstance(x, np.ndarray):
        return torch.from_numpy(np.ascontiguousarray(x))
    return x.item() if isinstance(x, np.generic) else x


def tensorize(obj: Any) -> Any:
    """numpy arrays -> tensors, recursively (torch's safe loader accepts tensors, not arrays)."""
    return map_tree(obj, _tensor, tuples_as_lists=True)


def numpify(obj: Any) -> Any:
    """tensors -> numpy arrays, recursively (for env actions and the replay memory)."""
    return map_tree(obj, lambda x: x.cpu().numpy() if isinstance(x, torch.Tensor) else x)


def _fsync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def save(path: Path, meta: dict[str, Any], tensors: dict[str, Any]) -> None:
    """Write atomically: temp file, fsync, rename. On failure the old file is untouched."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    obj = {"format": FORMAT, "version": VERSION, "meta": json.dumps(meta), "tensors": tensorize(tensors)}
    try:
        with open(tmp, "wb") as f:
            torch.save(obj, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as e:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise CheckpointError(f"could not write checkpoint {str(path)!r}: {e.strerror or e}; "
                              "the previous checkpoint is intact") from None
    _fsync_dir(path.parent)


def load(path: Path, device: torch.device | str = "cpu") -> tuple[dict[str, Any], dict[str, Any]]:
    """(meta, tensors) of a checkpoint, or a CheckpointError saying what is wrong with it."""
    if not path.is_file():
        raise CheckpointError(f"no checkpoint at {str(path)!r}")
    try:
        obj = torch.load(path, map_location=device, weights_only=True)
    except (RuntimeError, EOFError, zipfile.BadZipFile, OSError, ValueError) as e:
        raise CheckpointError(f"checkpoint {str(path)!r} is damaged or truncated and cannot be read "
                              f"({type(e).__name__}: {str(e).splitlines()[0][:120]})") from None
    except Exception as e:  # the unpickler refusing a class, etc.
        raise CheckpointError(f"checkpoint {str(path)!r} is not an evohpo checkpoint "
                              f"({type(e).__name__}: {str(e).splitlines()[0][:120]})") from None
    if not isinstance(obj, dict) or obj.get("format") != FORMAT:
        raise CheckpointError(f"{str(path)!r} is not an evohpo checkpoint")
    version = obj.get("version")
    if not isinstance(version, int) or version > VERSION:
        raise CheckpointError(f"checkpoint {str(path)!r} has format version {version}, newer than this "
                              f"evohpo reads (up to {VERSION}); upgrade evohpo to load it")
    try:
        meta = json.loads(obj["meta"])
    except (KeyError, TypeError, json.JSONDecodeError):
        raise CheckpointError(f"checkpoint {str(path)!r} has unreadable metadata") from None
    return meta, obj.get("tensors", {})


# ----------------------------------------------------------------------------- a run's state

def run_files(run_dir: Path | None) -> dict[str, int]:
    """Sizes of the run's append-only logs: a resumed run cuts them back to these lengths."""
    if run_dir is None:
        return {}
    return {name: (run_dir / name).stat().st_size if (run_dir / name).exists() else 0
            for name in ("metrics.jsonl", "lineage.jsonl")}


def truncate_run_files(run_dir: Path, sizes: dict[str, int]) -> None:
    """Drop log lines written after the checkpoint (a crash between log and checkpoint, or the
    final evaluation of a budget that the resumed run extends)."""
    for name, size in sizes.items():
        p = run_dir / name
        if p.exists() and p.stat().st_size > size:
            with open(p, "r+b") as f:
                f.truncate(size)
