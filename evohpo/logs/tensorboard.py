"""TensorBoard logging (``logging.tensorboard``): event files in ``<run dir>/tensorboard``.

The scalars W&B charts (:mod:`evohpo.logs.scalars`), one point per generation under the same
slash-separated tags (``eval/best_fitness``, ``train/episodic_return``,
``time/env_steps_per_s``, ``member/<id>/lr_actor``, ``best/<key>``, ``evo/survived``, ...), with
the population's env steps as the global step. Written through torch's ``SummaryWriter``: the
``tensorboard`` extra (``pip install 'evohpo[tensorboard]'``).

A resumed run adds an event file beside the earlier ones. Its first event tells TensorBoard to
drop what earlier sessions wrote at or after the step of the last generation the checkpoint
kept (a generation logged after the last checkpoint, or the final evaluation of a budget the
resumed run extends); that generation is written again, so each generation shows once.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from evohpo.errors import ConfigError
from evohpo.logs.loggers import Logger
from evohpo.logs.scalars import add_selection, generation_scalars, member_fields

INSTALL = "pip install 'evohpo[tensorboard]'"


def summary_writer() -> Any:
    """torch's ``SummaryWriter`` class, or one clear line when TensorBoard is not installed."""
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError as e:
        raise ConfigError(f"logging.tensorboard is true but TensorBoard cannot be imported ({e}); "
                          f"{INSTALL}, or set logging.tensorboard=false") from None
    return SummaryWriter


class TensorboardLogger(Logger):
    def __init__(self, run_dir: Path, resume: bool = False):
        writer = summary_writer()
        self.made_by: dict[str, str] = {}              # member id -> how it was made
        self.members: dict[str, dict[str, Any]] = {}   # the generation being logged
        self.pending: tuple[int, dict[str, Any]] | None = None
        self.written: list[tuple[int, dict[str, Any]]] = []
        self.writer: Any = None  # None while replaying: rows go to self.written
        logdir = run_dir / "tensorboard"
        purge = None
        if resume:
            self.replay(run_dir)
            if any(logdir.glob("events.out.tfevents.*")):
                # TensorBoard drops what earlier sessions wrote from the last generation kept on
                # (all of it where none was kept); that generation is written again below
                purge = self.written[-1][0] if self.written else 0
                self.written = [(s, row) for s, row in self.written if s >= purge]
        self.writer = writer(str(logdir), purge_step=purge)
        for step, row in self.written:  # all of them where TensorBoard was off before
            self._write(step, row)
        self.written = []
        self.writer.flush()

    def replay(self, run_dir: Path) -> None:
        """A resumed run: the rows of the generations its logs keep (cut back to its checkpoint),
        with the bookkeeping that the next selection's counts need."""
        from evohpo.report.data import read_jsonl

        lineage: dict[int, list[dict[str, Any]]] = {}
        for r in read_jsonl(run_dir / "lineage.jsonl"):
            lineage.setdefault(int(r["generation"]), []).append(r)
        for m in read_jsonl(run_dir / "metrics.jsonl"):
            self.log(m, int(m.get("env_steps", 0)))
            self.lineage(lineage.get(int(m.get("generation", -1)), []))

    def log(self, metrics: dict[str, Any], step: int) -> None:
        # held back until lineage(): the selection that follows a generation is counted with it
        self._flush()
        self.members = member_fields(metrics)
        for mid in self.members:
            self.made_by.setdefault(mid, "initial")
        self.pending = (step, {k: v for k, v in generation_scalars(metrics, self.members).items()
                               if k != "env_steps"})

    def lineage(self, records: list[dict[str, Any]]) -> None:
        if self.pending is not None and records:
            add_selection(self.pending[1], self.members, self.made_by, records)
        for r in records:
            self.made_by[str(r["member_id"])] = r["kind"]
        self._flush()

    def _flush(self) -> None:
        if self.pending is None:
            return
        if self.writer is None:
            self.written.append(self.pending)
        else:
            self._write(*self.pending)
            self.writer.flush()  # a TensorBoard watching the run sees each generation at once
        self.pending = None

    def _write(self, step: int, row: dict[str, Any]) -> None:
        for tag, value in row.items():
            self.writer.add_scalar(tag, value, global_step=step)

    def close(self) -> None:
        self._flush()
        if self.writer is not None:
            self.writer.close()
