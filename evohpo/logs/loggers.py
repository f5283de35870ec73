"""Loggers behind one ``log(metrics, step)``: console (progress bar + a line per generation), JSONL.

W&B is in :mod:`evohpo.logs.wandb` (imported only when a run asks for it).
"""

from __future__ import annotations

import json
import math
import os
import platform
import sys
import time
from pathlib import Path
from typing import IO, Any

from tqdm import tqdm

from evohpo.logs.evolution import IDS, evolution_line, new_ids


def _clean(v: Any) -> Any:
    """JSON has no NaN or inf: write them as null."""
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, dict):
        return {k: _clean(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_clean(x) for x in v]
    return v


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write via a temporary file and rename: a crash leaves the old file or the new one, never
    half."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def atomic_write_text(path: Path, text: str) -> None:
    """:func:`atomic_write_bytes` of ``text`` in UTF-8."""
    atomic_write_bytes(path, text.encode("utf-8"))


PACKAGES = ("evohpo", "torch", "numpy", "pettingzoo", "mpe2", "wandb", "matplotlib")


def _cpuinfo() -> dict[str, str]:
    """The first processor's fields of /proc/cpuinfo (empty where there is none)."""
    try:
        with open("/proc/cpuinfo") as f:
            head = f.read().split("\n\n", 1)[0]
    except OSError:
        return {}
    return {k.strip(): v.strip() for k, _, v in (ln.partition(":") for ln in head.splitlines())}


def machine_kind() -> str:
    """What decides a run's floating-point arithmetic on the CPU: the processor's vendor, family,
    model and stepping, and the vector kernels torch picks for it (a VM often names its CPU no
    more precisely than "AMD EPYC", while the kernels, and so the last bits of a result, differ
    between its generations). The same seed repeats a run exactly only on one kind."""
    info = _cpuinfo()
    ids = [info.get(k) for k in ("vendor_id", "cpu family", "model", "stepping")]
    cpu = (f"{ids[0]} family {ids[1]} model {ids[2]} stepping {ids[3]}" if all(ids)
           else platform.processor() or platform.machine())
    torch = sys.modules.get("torch")  # loaded by every run before its loggers open
    if torch is not None:
        cpu += f", torch {torch.__version__} {torch.backends.cpu.get_cpu_capability()}"
    return cpu


def system_info() -> dict[str, Any]:
    """Where and with what a run ran: versions, machine, command line (one line of system.jsonl)."""
    from importlib import metadata

    versions: dict[str, str | None] = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    # the model name is only in /proc on Linux; platform.processor() is often empty there
    cpu = _cpuinfo().get("model name") or platform.processor() or platform.machine()
    gpus: list[str] = []
    torch = sys.modules.get("torch")  # only ask torch about GPUs if the run has loaded it already
    if torch is not None and torch.cuda.is_available():
        gpus = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    try:
        mem_gb: float | None = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (ValueError, OSError, AttributeError):
        mem_gb = None
    return {"time": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "host": platform.node(),
            "platform": platform.platform(), "cpu": cpu, "machine": machine_kind(),
            "cpu_count": os.cpu_count(),
            "memory_gb": round(mem_gb, 1) if mem_gb else None, "gpus": gpus,
            "versions": versions, "argv": list(sys.argv)}


class Logger:
    def log(self, metrics: dict[str, Any], step: int) -> None:
        pass

    def lineage(self, records: list[dict[str, Any]]) -> None:
        pass

    def league(self, record: dict[str, Any]) -> None:
        """One generation's cross-play matches (games of several teams)."""

    def progress(self, steps: int, postfix: dict[str, Any]) -> None:
        pass

    def message(self, text: str) -> None:
        pass

    def close(self) -> None:
        pass


class JsonlLogger(Logger):
    """metrics.jsonl (one line per generation), lineage.jsonl (one line per mutation record), and
    system.jsonl (one line per process that wrote to the run: versions, machine; for the report)."""

    def __init__(self, run_dir: Path):
        self.run_dir = run_dir
        self.league_f: IO[str] | None = None
        self.metrics = open(run_dir / "metrics.jsonl", "a")
        self.lineage_f = open(run_dir / "lineage.jsonl", "a")
        with open(run_dir / "system.jsonl", "a") as f:
            f.write(json.dumps(_clean(system_info())) + "\n")

    def _write(self, f: IO[str], obj: dict[str, Any]) -> None:
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

    def league(self, record: dict[str, Any]) -> None:
        if self.league_f is None:  # league.jsonl exists only for games of several teams
            self.league_f = open(self.run_dir / "league.jsonl", "a")
        self._write(self.league_f, record)

    def close(self) -> None:
        self.metrics.close()
        self.lineage_f.close()
        if self.league_f is not None:
            self.league_f.close()


def counted(n: int, noun: str) -> str:
    """``n`` and ``noun``, plural unless there is one: "1 generation", "3 generations"."""
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def seconds(s: float) -> str:
    """Wall seconds as the console prints them: hundredths under a second and tenths under a
    minute, so a short run is not "0s"."""
    return f"{s:.2f}s" if s < 0.995 else f"{s:.1f}s" if s < 59.95 else f"{s:.0f}s"


def summary_line(m: dict[str, Any]) -> str:
    def f(x: Any) -> str:
        return "nan" if x is None or (isinstance(x, float) and not math.isfinite(x)) else f"{x:.2f}"

    # a game of several teams: each team's champion and mean, not the first team's alone
    teams = [k[5:-len("/champion")] for k in m if k.startswith("team/") and k.endswith("/champion")]
    fitness = ("  ".join(f"{t} best {f(m[f'team/{t}/best_fitness'])} (member "
                         f"{m[f'team/{t}/champion']}) mean {f(m[f'team/{t}/mean_fitness'])}"
                         for t in teams) if teams else
               f"best {f(m['eval/best_fitness'])}  mean {f(m['eval/mean_fitness'])}  "
               f"best member {m['eval/best_member']}")
    return (f"gen {m['generation']:>4}  steps {m['env_steps']:>10,}  {fitness}  "
            f"{m['time/env_steps_per_s']:,.0f} steps/s  {seconds(m['time/elapsed_s'])}")


class ConsoleLogger(Logger):
    """A tqdm bar over the env-step budget, one summary line per generation, and one line on
    what evolution did where it changed a member.

    ``total``: the env steps the run will reach (a bar never passes it: tqdm drops a total that
    is passed). ``resumed``: the checkpoint a resumed run goes on from; one taken at its budget's
    end came before that generation's line, which the run writes again: not shown twice.
    """

    def __init__(self, total: int, resumed: dict[str, Any] | None = None):
        r = resumed or {}
        self.total, self._last = total, int(r.get("env_steps", 0))
        self._bar: tqdm | None = None  # made at the first step: an error before it shows no bar
        self._shown = (r["generation"], self._last) if r.get("budget_end") else None
        self._ids_told = False  # why ids run past the population size: said once

    @property
    def bar(self) -> tqdm:
        if self._bar is None:
            self._bar = tqdm(total=self.total, initial=self._last, unit="step", unit_scale=True,
                             dynamic_ncols=True, file=sys.stderr, smoothing=0.05, mininterval=0.5)
        return self._bar

    def progress(self, steps: int, postfix: dict[str, Any]) -> None:
        self.bar.update(steps - self._last)
        self._last = steps
        if postfix:
            self.bar.set_postfix(postfix, refresh=False)

    def log(self, metrics: dict[str, Any], step: int) -> None:
        shown, self._shown = self._shown, None
        if shown != (metrics.get("generation"), step):
            self.bar.write(summary_line({"env_steps": step, **metrics}), file=sys.stdout)

    def lineage(self, records: list[dict[str, Any]]) -> None:
        line = evolution_line(records)
        if line is None:
            return
        if not self._ids_told and new_ids(records):
            line, self._ids_told = f"{line} ({IDS})", True
        self.message(line)

    def message(self, text: str) -> None:
        if self._bar is None:
            print(text, flush=True)
        else:
            self._bar.write(text, file=sys.stdout)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()


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

    def league(self, record: dict[str, Any]) -> None:
        for lg in self.loggers:
            lg.league(record)

    def progress(self, steps: int, postfix: dict[str, Any]) -> None:
        for lg in self.loggers:
            lg.progress(steps, postfix)

    def message(self, text: str) -> None:
        for lg in self.loggers:
            lg.message(text)

    def close(self) -> None:
        for lg in self.loggers:
            lg.close()
