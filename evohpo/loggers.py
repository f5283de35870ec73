"""Loggers behind one ``log(metrics, step)``: console (progress bar + a line per generation), JSONL."""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path
from typing import Any

from tqdm import tqdm


def _clean(v: Any) -> Any:
    """JSON has no NaN or inf: write them as null."""
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, dict):
        return {k: _clean(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_clean(x) for x in v]
    return v


def atomic_write_text(path: Path, text: str) -> None:
    """Write via a temporary file and rename: a crash leaves the old file or the new one, never half."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


class Logger:
    def log(self, metrics: dict[str, Any], step: int) -> None:
        pass

    def lineage(self, records: list[dict[str, Any]]) -> None:
        pass

    def progress(self, steps: int, postfix: dict[str, Any]) -> None:
        pass

    def message(self, text: str) -> None:
        pass

    def close(self) -> None:
        pass


class JsonlLogger(Logger):
    """metrics.jsonl (one line per generation) and lineage.jsonl (one line per mutation record)."""

    def __init__(self, run_dir: Path):
        self.metrics = open(run_dir / "metrics.jsonl", "a")
        self.lineage_f = open(run_dir / "lineage.jsonl", "a")

    def _write(self, f: Any, obj: dict[str, Any]) -> None:
        f.write(json.dumps(_clean(obj)) + "\n")
        f.flush()
        os.fsync(f.fileno())

    def log(self, metrics: dict[str, Any], step: int) -> None:
        self._write(self.metrics, {"env_steps": step, **metrics})

    def lineage(self, records: list[dict[str, Any]]) -> None:
        for r in records:
            self.lineage_f.write(json.dumps(_clean(r)) + "\n")
        self.lineage_f.flush()
        os.fsync(self.lineage_f.fileno())

    def close(self) -> None:
        self.metrics.close()
        self.lineage_f.close()


def summary_line(m: dict[str, Any]) -> str:
    def f(x: Any) -> str:
        return "nan" if x is None or (isinstance(x, float) and not math.isfinite(x)) else f"{x:.2f}"

    return (f"gen {m['generation']:>4}  steps {m['env_steps']:>10,}  best {f(m['eval/best_fitness'])}  "
            f"mean {f(m['eval/mean_fitness'])}  best member {m['eval/best_member']}  "
            f"{m['train/env_steps_per_s']:,.0f} steps/s  {m['time/elapsed_s']:.0f}s")


class ConsoleLogger(Logger):
    """A tqdm bar over the env-step budget, and one summary line per generation."""

    def __init__(self, total: int, initial: int = 0):
        self.bar = tqdm(total=total, initial=initial, unit="step", unit_scale=True, dynamic_ncols=True,
                        file=sys.stderr, smoothing=0.05, mininterval=0.5)
        self._last = initial

    def progress(self, steps: int, postfix: dict[str, Any]) -> None:
        self.bar.update(steps - self._last)
        self._last = steps
        if postfix:
            self.bar.set_postfix(postfix, refresh=False)

    def log(self, metrics: dict[str, Any], step: int) -> None:
        self.bar.write(summary_line({"env_steps": step, **metrics}), file=sys.stdout)

    def message(self, text: str) -> None:
        self.bar.write(text, file=sys.stdout)

    def close(self) -> None:
        self.bar.close()


class Loggers(Logger):
    """Fan out to several loggers."""

    def __init__(self, loggers: list[Logger]):
        self.loggers = loggers

    def log(self, metrics: dict[str, Any], step: int) -> None:
        for lg in self.loggers:
            lg.log(metrics, step)

    def lineage(self, records: list[dict[str, Any]]) -> None:
        for lg in self.loggers:
            lg.lineage(records)

    def progress(self, steps: int, postfix: dict[str, Any]) -> None:
        for lg in self.loggers:
            lg.progress(steps, postfix)

    def message(self, text: str) -> None:
        for lg in self.loggers:
            lg.message(text)

    def close(self) -> None:
        for lg in self.loggers:
            lg.close()
