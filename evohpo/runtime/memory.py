"""Whether a replay memory fits: refused at the start, not when numpy first touches its pages."""

from __future__ import annotations

import os

from evohpo.algos.buffer import ReplayBuffer, human_bytes
from evohpo.envs.spec import EnvSpec
from evohpo.errors import ConfigError


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
