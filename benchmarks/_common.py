"""Shared helpers of the benchmark scripts: build a config, run a trainer, print tables."""

from __future__ import annotations

import platform
import time
from pathlib import Path
from typing import Any

import torch

from evohpo import config as C
from evohpo.api import preset_path
from evohpo.logs.loggers import Logger


def preset_config(algo: str, env: str, *overrides: dict[str, Any]) -> C.Config:
    layers: list[dict[str, Any]] = []
    p = preset_path(algo, env)
    if p.is_file():
        layers.append(C.read_yaml(p))
    layers.append({"algo": {"name": algo}, "env": {"name": env}})
    return C.load([*layers, *overrides])


def machine() -> str:
    import os

    return (f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
            f"torch {torch.__version__} ({torch.get_num_threads()} threads), "
            f"python {platform.python_version()}")


class Collect(Logger):
    """Keeps every generation's metrics; optionally prints a row per generation."""

    def __init__(self, echo: bool = True, label: str = ""):
        self.rows: list[dict[str, Any]] = []
        self.echo, self.label = echo, label
        self.t0 = time.perf_counter()

    def log(self, metrics: dict[str, Any], step: int) -> None:
        row = {"env_steps": step, **metrics}
        self.rows.append(row)
        if self.echo:
            print(f"{self.label:<8} gen {row['generation']:>4} steps {step:>10,} "
                  f"wall {row['time/elapsed_s']:>7.0f}s best {row['eval/best_fitness']:>8.2f} "
                  f"mean {row['eval/mean_fitness']:>8.2f} "
                  f"{row['time/env_steps_per_s']:>7.0f} steps/s",
                  flush=True)


def run(cfg: C.Config, logger: Logger, run_dir: Path | None = None) -> dict[str, Any]:
    from evohpo.loop.trainer import Trainer

    t = Trainer(cfg, logger)
    try:
        return t.train()
    finally:
        t.close()
