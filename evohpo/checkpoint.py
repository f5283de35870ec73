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
from pathlib import Path
from typing import Any

import numpy as np
import torch

from evohpo.errors import EvohpoError

FORMAT = "evohpo-checkpoint"
VERSION = 1


class CheckpointError(EvohpoError):
    exit_code = 2


def tensorize(obj: Any) -> Any:
    """numpy arrays -> tensors, recursively (torch's safe loader accepts tensors, not arrays)."""
    if isinstance(obj, np.ndarray):
        return torch.from_numpy(np.ascontiguousarray(obj))
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, dict):
        return {k: tensorize(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [tensorize(v) for v in obj]
    return obj


def numpify(obj: Any) -> Any:
    """tensors -> numpy arrays, recursively (for env actions and the replay memory)."""
    if isinstance(obj, torch.Tensor):
        return obj.cpu().numpy()
    if isinstance(obj, dict):
        return {k: numpify(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [numpify(v) for v in obj]
    return obj


def _fsync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _first_line(e: BaseException) -> str:
    """The first line of an exception's message, or its type when it has none (an empty file)."""
    lines = str(e).strip().splitlines()
    return f"{type(e).__name__}: {lines[0][:120]}" if lines else type(e).__name__


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


def save(path: Path, meta: dict[str, Any], tensors: dict[str, Any]) -> None:
    """Write atomically: temp file, fsync, rename. On failure the old file is untouched and the
    temp file is gone, whatever the failure (torch's writer raises RuntimeError on a full disk)."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    obj = {"format": FORMAT, "version": VERSION, "meta": json.dumps(meta), "tensors": tensorize(tensors)}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        _remove_stale_temps(path)
        with open(tmp, "wb") as f:
            torch.save(obj, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except (OSError, RuntimeError) as e:
        why = _write_failure(e, path.parent)
        raise CheckpointError(f"could not write checkpoint {str(path)!r}: {why}; "
                              "the previous checkpoint is intact") from None
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)  # after a successful rename there is nothing left to remove
    _fsync_dir(path.parent)


def load(path: Path, device: torch.device | str = "cpu") -> tuple[dict[str, Any], dict[str, Any]]:
    """(meta, tensors) of a checkpoint, or a CheckpointError saying what is wrong with it."""
    if not path.is_file():
        raise CheckpointError(f"no checkpoint at {str(path)!r}")
    if path.stat().st_size == 0:
        raise CheckpointError(f"checkpoint {str(path)!r} is empty (0 bytes) and cannot be read")
    try:
        obj = torch.load(path, map_location=device, weights_only=True)
    except (RuntimeError, EOFError, zipfile.BadZipFile, OSError, ValueError) as e:
        raise CheckpointError(f"checkpoint {str(path)!r} is damaged or truncated and cannot be read "
                              f"({_first_line(e)})") from None
    except Exception as e:  # the unpickler refusing a class, etc.
        raise CheckpointError(f"checkpoint {str(path)!r} is not an evohpo checkpoint "
                              f"({_first_line(e)})") from None
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


def load_latest(run_dir: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """The checkpoint ``--resume`` continues from; a run stopped before its first one is told how
    to start afresh."""
    path = run_dir / "checkpoints" / "latest.pt"
    if not path.exists():
        raise CheckpointError(f"run {str(run_dir)!r} has no checkpoint to resume from (it stopped "
                              "before its first one); start it afresh with: evohpo train --config "
                              f"{run_dir / 'config.yaml'} --run-dir {run_dir} --overwrite")
    return load(path)


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
            for name in ("metrics.jsonl", "lineage.jsonl")}


def truncate_run_files(run_dir: Path, sizes: dict[str, int]) -> None:
    """Drop log lines written after the checkpoint (a crash between log and checkpoint, or the
    final evaluation of a budget that the resumed run extends)."""
    for name, size in sizes.items():
        p = run_dir / name
        if p.exists() and p.stat().st_size > size:
            with open(p, "r+b") as f:
                f.truncate(size)


def trainer_state(t: Any, with_buffer: bool) -> tuple[dict[str, Any], dict[str, Any]]:
    """(meta, tensors) of everything a resumed trainer needs to continue exactly."""
    from evohpo import __version__
    from evohpo.config import to_dict

    env_states = t.pool.get_state()
    meta = {
        "evohpo": __version__,
        "config": to_dict(t.cfg),
        "generation": t.generation, "env_steps": t.env_steps, "window_steps": t.window_steps,
        "next_id": t.next_id, "best_ever": t.best_ever if np.isfinite(t.best_ever) else None,
        "eval_rng": rng_state(t.eval_rng), "evo_rng": rng_state(t.evo_rng),
        "members": [{"id": m.id, "parent_id": m.parent_id, "born": m.born, "steps": m.steps,
                     "learn_acc": m.learn_acc, "fitness": m.fitness, "diverged": m.diverged,
                     "diverged_why": m.diverged_why,
                     "rng": rng_state(m.rng)} for m in t.members],
        "loop": {"done": t.done.tolist(), "ep_return": t.ep_return.tolist(),
                 "train_returns": t.train_returns, "loss_stats": t.loss_stats},
        "files": run_files(t.run_dir),
        "has_buffer": with_buffer, "restarts": t.restarts, "dropped": t.dropped,
        "elapsed_s": t.elapsed(),
    }
    tensors = {
        "members": [m.algo.state_dict() for m in t.members],
        "obs": t.obs,
        "pool": env_states,  # whatever the pool needs to rebuild its envs, as plain data
        "buffer": t.buffer.state_dict() if with_buffer else {},
    }
    return meta, tensors


def restore_trainer(t: Any, meta: dict[str, Any], tensors: dict[str, Any]) -> None:
    """Put a checkpoint's state into a freshly built trainer of the same config."""
    from evohpo.algos import MATD3
    from evohpo.population import Member, switches

    sw = switches(t.cfg)
    t.members = [
        Member(id=m["id"], parent_id=m["parent_id"], algo=MATD3.from_state_dict(t.spec, sw, st, t.device),
               rng=rng_from(m["rng"]), born=m["born"], steps=m["steps"], learn_acc=m["learn_acc"],
               fitness=list(m["fitness"]), diverged=m["diverged"], diverged_why=m.get("diverged_why", ""))
        for m, st in zip(meta["members"], tensors["members"], strict=True)]
    t.generation, t.env_steps, t.window_steps = meta["generation"], meta["env_steps"], meta["window_steps"]
    t.next_id = meta["next_id"]
    t.restarts, t.dropped = meta.get("restarts", 0), meta.get("dropped", 0)
    t.elapsed_before = float(meta.get("elapsed_s", 0.0))  # time/elapsed_s goes on from there
    t.best_ever = -np.inf if meta["best_ever"] is None else meta["best_ever"]
    t.eval_rng, t.evo_rng = rng_from(meta["eval_rng"]), rng_from(meta["evo_rng"])
    loop = meta["loop"]
    t.done = np.array(loop["done"], bool)
    t.ep_return = np.array(loop["ep_return"], np.float64)
    t.train_returns = list(loop["train_returns"])
    t.loss_stats = [dict(s) for s in loop["loss_stats"]]
    if meta["has_buffer"]:
        t.buffer.load_state_dict(numpify(tensors["buffer"]))
    t.pool.reset(seed=t.pool_seed)
    t.obs = t.pool.set_state(numpify(tensors["pool"]))
    saved_obs = numpify(tensors["obs"])
    for a, o in saved_obs.items():  # the rebuilt envs must show what the saved run saw
        if not np.array_equal(t.obs[a], o):
            raise CheckpointError(f"the envs could not be rebuilt exactly from the checkpoint (agent {a!r} "
                                  "observes something else); was the env or its version changed?")
