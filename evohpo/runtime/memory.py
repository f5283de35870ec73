"""Whether a replay memory fits: refused at the start, not when numpy first touches its pages."""

from __future__ import annotations

import os

from evohpo.algos.buffer import ReplayBuffer, human_bytes
from evohpo.config import Config
from evohpo.envs.spec import EnvSpec
from evohpo.errors import ConfigError


def fillable(cfg: Config, transitions: int) -> int:
    """``transitions``, or fewer where the budget cannot fill that many: a run stores at most one
    transition per env step. The one rule by which the replay memory is sized and a window's
    experience is announced."""
    return min(transitions, cfg.steps)


def replay_capacity(cfg: Config) -> int:
    """Rows of the replay memory: ``buffer.capacity``, or fewer where the budget cannot fill that
    many. The rows are the same either way, and a resume that extends the budget grows the
    memory (loading keeps the order of the rows), so a run resumed with a larger budget samples
    what the run trained in one go did."""
    return fillable(cfg, cfg.buffer.capacity)


def window_transitions(cfg: Config) -> int:
    """Transitions the population stores in one evolution window: every member's ``evo_steps``
    rounded up to whole steps of its envs (a window is never cut), or fewer where the budget
    cannot fill that many."""
    k = cfg.env.num_envs // cfg.population.size  # envs per member
    return fillable(cfg, -(-cfg.evolution.evo_steps // k) * cfg.env.num_envs)


def describe_sharing(cfg: Config, row_bytes: int, actors: int) -> str:
    """The Ray runtime's line on what sharing experience moves per window and what each actor's
    replay copy holds (``row_bytes``: one transition's)."""
    window, copy = window_transitions(cfg), replay_capacity(cfg)
    return (f"ray: experience sharing moves ~{human_bytes(window * row_bytes * (actors - 1))} "
            f"per window ({window:,} transitions x {row_bytes} B x {actors - 1} other "
            f"actor{'' if actors == 2 else 's'}); every actor keeps a "
            f"{human_bytes(copy * row_bytes)} replay copy ({copy:,} transitions)")


def describe(cfg: Config, nbytes: int) -> str:
    """The console's line on the replay memory: its rows, why that many, and its size."""
    n = replay_capacity(cfg)
    why = ("buffer.capacity" if n == cfg.buffer.capacity
           else f"what the budget can fill; buffer.capacity is {cfg.buffer.capacity:,}")
    return (f"replay memory: {n:,} transitions ({why}), {human_bytes(nbytes)}, "
            "taken from the system as it fills")


def available_memory() -> int | None:
    """Bytes of memory available to new allocations (Linux MemAvailable), or None if unknown."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def check_memory(spec: EnvSpec, capacity: int, next_actions: bool = False) -> None:
    """Refuse a replay memory that cannot fit: numpy would allocate lazily and fail much later."""
    need = ReplayBuffer.bytes_for(spec, capacity, next_actions)
    have = available_memory()
    if have is not None and need > 0.9 * have:
        raise ConfigError(f"config key 'buffer.capacity': {capacity:,} transitions need "
                          f"{human_bytes(need)} but only {human_bytes(have)} of memory is "
                          "available; lower buffer.capacity")
