"""What ``device: auto`` picks: a GPU only where the run's networks are large enough to pay.

An update of these small networks is a few hundred kernels of a few microseconds of work each,
so on a GPU it waits on their launches and costs about the same at any size. Measured on an H200
machine (benchmarks/README.md, "On a GPU"): one MATD3 update took 10-18 ms on the GPU at every
width from 64 to 1024 and batch 256 or 1024, while on one CPU thread it grows with width squared
times the batch and is level with the GPU's at 128 wide with batches of 256 (or 64 wide with
1024). Acting is faster on the CPU at every size, so the whole loop crosses over later: at 64
wide and batches of 256 (the presets) it trained 2.2 times faster on the CPU, at 256 wide 1.2
times faster on the GPU. ``auto`` takes the GPU from there: the widest initial hidden layer,
squared, times the batch size at least :data:`AUTO_GPU_WORK`. ``cuda`` (or ``cuda:N``) always
takes it.
"""

from __future__ import annotations

import torch

from evohpo.config import Config
from evohpo.errors import ConfigError

AUTO_GPU_WORK = 256 * 256 * 256  # widest hidden layer squared x batch_size: auto takes a GPU


def _widest(cfg: Config) -> int:
    return max(cfg.algo.hidden, default=0)


def gpu_pays(cfg: Config) -> bool:
    """Whether the run's networks are large enough that a GPU trains them faster."""
    return _widest(cfg) ** 2 * cfg.algo.batch_size >= AUTO_GPU_WORK


def wants_gpu(cfg: Config) -> bool:
    """Whether the run asks for a GPU: ``cuda``, ``cuda:N``, or ``auto`` at sizes that pay."""
    return cfg.device.startswith("cuda") or (cfg.device == "auto" and gpu_pays(cfg))


def auto_choice(cfg: Config) -> str:
    """Why ``auto`` left a GPU unused, for the run's log."""
    return (f"device auto: the CPU; at {_widest(cfg)} units wide and batches "
            f"of {cfg.algo.batch_size} it trains faster than the GPU (which pays from widest "
            f"layer squared x batch size {AUTO_GPU_WORK:,}); --set device=cuda takes the GPU")


def resolve_device(cfg: Config) -> torch.device:
    """``cfg.device``; ``auto``: a GPU where there is one and the networks are large enough to
    gain from it (:func:`evohpo.devices.gpu_pays`), else the CPU."""
    name = cfg.device
    if name == "auto":
        return torch.device("cuda" if gpu_pays(cfg) and torch.cuda.is_available() else "cpu")
    dev = torch.device(name)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"config key 'device': {name!r} asked for, but no CUDA device is "
                          "available; use 'auto' or 'cpu'")
    return dev
