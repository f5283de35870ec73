"""Versioned, atomic checkpoints of a whole run: tensors plus JSON metadata, no pickled classes.

A checkpoint file holds ``{"format", "version", "meta": <JSON text>, "tensors": <nested dicts
and lists of tensors and numbers>, "checksum"}`` and is read with
``torch.load(weights_only=True)``, which refuses anything but tensors and plain containers. So a
checkpoint loads in a later evohpo, or says clearly why it cannot. The checksum (SHA-256 of the
metadata and every tensor's bytes) is written in the same file: torch's reader does not notice
bytes changed inside a tensor, the checksum does (files written before it existed load unchecked).
Writes go to a temporary file that is fsynced and then renamed over the old one: a crash or
``kill -9`` at any moment leaves the previous checkpoint intact. The file it replaces stays beside
it as ``<name>.prev.pt`` (a hard link, no copy), which a damaged checkpoint's error names.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
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


def _first_line(e: BaseException, limit: int = 120) -> str:
    """The first sentence of an exception's message, cut at a word and at most about ``limit``
    characters, or its type when it has none (an empty file)."""
    lines = str(e).strip().splitlines()
    if not lines:
        return type(e).__name__
    text = re.split(r"(?<=[.!?])\s", lines[0], maxsplit=1)[0].rstrip(".")
    if len(text) > limit:
        text = text[:limit].rsplit(" ", 1)[0].rstrip(",;:") + " ..."
    return f"{type(e).__name__}: {text}"


def digest(meta: str, tensors: Any) -> str:
    """SHA-256 of a checkpoint's content: its metadata text, and every leaf of its tensors with
    the structure that holds it (keys, list lengths, dtypes and shapes)."""
    h = hashlib.sha256(meta.encode())

    def walk(x: Any) -> None:
        if isinstance(x, dict):
            h.update(f"{{{len(x)}".encode())
            for k, v in x.items():
                h.update(repr(k).encode())
                walk(v)
        elif isinstance(x, (list, tuple)):
            h.update(f"[{len(x)}".encode())
            for v in x:
                walk(v)
        elif isinstance(x, torch.Tensor):
            t = x.detach().cpu().contiguous()
            h.update(f"<{t.dtype}{tuple(t.shape)}".encode())
            h.update(t.reshape(-1).view(torch.uint8).numpy().data)
        else:
            h.update(f"<{type(x).__name__}:{x!r}".encode())

    walk(tensors)
    return f"sha256:{h.hexdigest()}"


def _write_failure(e: BaseException, where: Path) -> str:
    """Why a write failed. torch's zip writer reports a full disk as a RuntimeError ("unexpected
    pos ..."), without the OS error: say so when the filesystem has no room left."""
    if isinstance(e, OSError) and e.strerror:
        return e.strerror
    try:
        free = os.statvfs(where).f_bavail * os.statvfs(where).f_frsize
    except OSError:
        free = None
    if free is not None and free < (1 << 20):
        return f"no space left on the device ({free:,} bytes free)"
    return _first_line(e)


def _remove_stale_temps(path: Path) -> None:
    """Temp files of this checkpoint left by a process that is gone (killed mid-write)."""
    for tmp in path.parent.glob(f".{path.name}.tmp-*"):
        pid = tmp.name.rsplit("-", 1)[-1]
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            with contextlib.suppress(OSError):
                tmp.unlink()
        except OSError:
            pass  # alive (another user's process): not ours to remove


def previous(path: Path) -> Path:
    """Where the checkpoint that ``path`` replaced is kept (``latest.pt`` -> ``latest.prev.pt``)."""
    return path.with_name(f"{path.stem}.prev{path.suffix}")


def _keep_previous(path: Path) -> None:
    """The file about to be replaced, linked as :func:`previous` (each step atomic: ``path``
    itself is never missing). Where links are not allowed none is kept."""
    prev = previous(path)
    link = prev.with_name(f".{prev.name}.tmp-{os.getpid()}")
    _remove_stale_temps(prev)
    try:
        link.unlink(missing_ok=True)
        os.link(path, link)
        os.replace(link, prev)
    except OSError:
        with contextlib.suppress(OSError):
            link.unlink(missing_ok=True)


def save(path: Path, meta: dict[str, Any], tensors: dict[str, Any]) -> None:
    """Write atomically: temp file, fsync, rename. On failure the old file is untouched and the
    temp file is gone, whatever the failure (torch's writer raises RuntimeError on a full disk)."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    text, content = json.dumps(meta), tensorize(tensors)
    obj = {"format": FORMAT, "version": VERSION, "meta": text, "tensors": content,
           "checksum": digest(text, content)}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        _remove_stale_temps(path)
        with open(tmp, "wb") as f:
            torch.save(obj, f)
            f.flush()
            os.fsync(f.fileno())
        if path.is_file():
            _keep_previous(path)
        os.replace(tmp, path)
    except (OSError, RuntimeError) as e:
        why = _write_failure(e, path.parent)
        raise CheckpointError(f"could not write checkpoint {str(path)!r}: {why}; "
                              "the previous checkpoint is intact") from None
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)  # after a successful rename there is nothing left to remove
    _fsync_dir(path.parent)


def _intact_zip(path: Path) -> bool:
    """Whether ``path`` is a zip archive (torch's format) whose every entry matches its CRC."""
    try:
        with zipfile.ZipFile(path) as z:
            return z.testzip() is None
    except Exception:
        return False


def moment(meta: dict[str, Any]) -> str:
    """Where in its run a checkpoint stands, numbered as the console, ``metrics.jsonl`` and
    ``lineage.jsonl`` number generations: by the generation whose line shows these env steps.
    A run's checkpoint (``latest.pt``) is taken once the next window has begun, so its own
    counter is one ahead of the generation just logged, unless taken at the budget's end (before
    that generation's line) or partway through a window (an interrupt)."""
    gen, steps = meta.get("generation"), meta.get("env_steps")
    if not isinstance(gen, int) or not isinstance(steps, int):
        return ""
    if "window_steps" in meta and not meta.get("budget_end"):
        if meta["window_steps"] or gen == 0:
            return f"partway through generation {gen}, {steps:,} env steps"
        gen -= 1
    return f"generation {gen}, {steps:,} env steps"


def _damaged(path: Path, why: str) -> CheckpointError:
    """A damaged checkpoint's error: what is wrong, and the previous checkpoint if it is good."""
    prev, instead = previous(path), "no earlier checkpoint of it is kept"
    # a file copied onto a directory would land inside it: say to move what is there first
    put = (f"copy it over {path.name}" if path.is_file() or not path.exists()
           else f"move {path.name} aside and put a copy of it in its place")
    if prev.is_file():
        try:
            at = moment(load(prev, previous_too=False)[0])
            instead = (f"the previous checkpoint {str(prev)!r}{f' ({at})' if at else ''} is "
                       f"intact: {put} to go on from there")
        except CheckpointError:
            instead = f"the previous checkpoint {str(prev)!r} cannot be read either"
    return CheckpointError(f"checkpoint {str(path)!r} is {why}; {instead}")


def load(path: Path, device: torch.device | str = "cpu",
         previous_too: bool = True) -> tuple[dict[str, Any], dict[str, Any]]:
    """(meta, tensors) of a checkpoint, or a CheckpointError saying what is wrong with it (for a
    damaged one, with ``previous_too``: whether the checkpoint it replaced is good)."""
    def damaged(why: str) -> CheckpointError:
        what = f"damaged or truncated and cannot be read ({why})" if why else "empty (0 bytes)"
        return _damaged(path, what) if previous_too else CheckpointError(what)

    if path.exists() and not path.is_file():  # say what is there, and what is kept instead
        what = ("a directory, not a checkpoint file" if path.is_dir()
                else "not a regular file, so not a checkpoint")
        raise _damaged(path, what) if previous_too else CheckpointError(what)
    if not path.is_file():
        raise CheckpointError(f"no checkpoint at {str(path)!r}")
    if path.stat().st_size == 0:
        raise damaged("")
    try:
        obj = torch.load(path, map_location=device, weights_only=True)
    except (RuntimeError, EOFError, zipfile.BadZipFile, OSError, ValueError) as e:
        raise damaged(_first_line(e)) from None
    except Exception as e:  # the unpickler refusing a class, or refusing damaged bytes
        if not _intact_zip(path):
            raise damaged(_first_line(e)) from None
        raise CheckpointError(f"checkpoint {str(path)!r} is not an evohpo checkpoint "
                              f"({_first_line(e)})") from None
    if not isinstance(obj, dict) or obj.get("format") != FORMAT:
        raise CheckpointError(f"{str(path)!r} is not an evohpo checkpoint")
    version = obj.get("version")
    if not isinstance(version, int) or version > VERSION:
        raise CheckpointError(f"checkpoint {str(path)!r} has format version {version}, newer "
                              f"than this evohpo reads (up to {VERSION}); upgrade evohpo "
                              "to load it")
    tensors = obj.get("tensors", {})
    checksum = obj.get("checksum")  # None: written before checkpoints carried one
    if checksum is not None and checksum != digest(str(obj.get("meta")), tensors):
        raise damaged("its content does not match the checksum written with it")
    try:
        meta = json.loads(obj["meta"])
    except (KeyError, TypeError, json.JSONDecodeError):
        raise CheckpointError(f"checkpoint {str(path)!r} has unreadable metadata") from None
    return meta, tensors


def _afresh(run_dir: Path) -> str:
    return f"evohpo train --config {run_dir / 'config.yaml'} --run-dir {run_dir} --overwrite"


def load_latest(run_dir: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """The checkpoint ``--resume`` continues from; a run stopped before its first one is told how
    to start afresh."""
    path = run_dir / "checkpoints" / "latest.pt"
    if not path.exists():
        raise CheckpointError(f"run {str(run_dir)!r} has no checkpoint to resume from (it stopped "
                              f"before its first one); start it afresh with: {_afresh(run_dir)}")
    return load(path)


def kept(run_dir: Path | None) -> str:
    """What a run that stops on an error leaves on disk to go on from, as a sentence."""
    if run_dir is None:
        return "Nothing is saved (the run has no run directory)."
    path = run_dir / "checkpoints" / "latest.pt"
    if path.is_file():
        return (f"The run's last checkpoint {str(path)!r} is kept: resume with evohpo train "
                f"--resume {run_dir}")
    return ("No checkpoint was written, so there is nothing to resume; start the run afresh "
            f"with: {_afresh(run_dir)}")


def rng_state(rng: np.random.Generator) -> dict[str, Any]:
    return dict(rng.bit_generator.state)


def rng_from(state: dict[str, Any]) -> np.random.Generator:
    bitgen = getattr(np.random, state["bit_generator"])()
    bitgen.state = state
    return np.random.Generator(bitgen)




# ----------------------------------------------------------------------------- a run's state

def run_files(run_dir: Path | None) -> dict[str, int]:
    """Sizes of the run's append-only logs: a resumed run cuts them back to these lengths."""
    if run_dir is None:
        return {}
    return {name: (run_dir / name).stat().st_size if (run_dir / name).exists() else 0
            for name in ("metrics.jsonl", "lineage.jsonl", "league.jsonl")}


def truncate_run_files(run_dir: Path, sizes: dict[str, int]) -> None:
    """Drop log lines written after the checkpoint (a crash between log and checkpoint, or the
    final evaluation of a budget that the resumed run extends)."""
    for name, size in sizes.items():
        p = run_dir / name
        if p.exists() and p.stat().st_size > size:
            with open(p, "r+b") as f:
                f.truncate(size)
