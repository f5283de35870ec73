"""Weights & Biases logging: the evolution live on a dashboard, and a record of it afterwards.

Per generation, against the global env step (``env_steps``, the x-axis of every chart):
everything the trainer logs (``train/``, ``eval/``, ``member/<id>/...``, ``evo/<kind>``), with
architectures written as numbers that chart (``member/<id>/hidden/<agent>/<net>/units`` and
``.../layers`` next to the ``"64-64"`` string), the best member's hyperparameters as ``best/<key>``,
and selection's verdict on each way a member was made: ``evo/survived`` (members of this
generation chosen as a parent or kept as the elite) and ``evo/survived/<kind>`` (those among
them made by a mutation of that kind, ``elite`` or ``initial``). The lineage grows while the run
runs (``lineage_live``, an incremental table): each record appears one generation after it was
made, with what followed it (the child's fitness change, whether the next selection kept it).
When the run ends: the whole lineage (``lineage``) and every member of every generation
(``members``: the population's ``env_steps`` beside the member's own ``member_env_steps``) as
tables, and checkpoints/best.pt as a model artifact.

Members are keyed by id, never by slot: a slot holds a different member after every selection.
The resolved config is the W&B run config. In offline mode everything goes to ``<run dir>/wandb``.
"""

from __future__ import annotations

import json
import math
import re
import sys
from pathlib import Path
from typing import Any

from evohpo.config import Config, to_dict
from evohpo.errors import ConfigError, EvohpoError
from evohpo.logs.loggers import Logger
from evohpo.logs.scalars import add_selection, generation_scalars, is_number, member_fields

ID_FILE = "evohpo-run-id"                   # in <run dir>/wandb: resumed runs continue this W&B run
LINEAGE_COLUMNS: list[Any] = ["generation", "member_id", "parent_id", "kind", "target", "op",
                              "before", "after", "parent_fitness", "fitness_next", "delta",
                              "selected_next", "note"]


class WandbError(EvohpoError):
    """W&B could not start (no login, no network): the user's to fix, as bad input is."""

    exit_code = 2


def cell(v: Any) -> Any:
    """A table cell: numbers and strings as they are, anything else as JSON text."""
    if v is None or isinstance(v, (str, bool)) or is_number(v):
        return None if isinstance(v, float) and not math.isfinite(v) else v
    return json.dumps(v)


def start_run(cfg: Config, run_dir: Path, resume: bool, quiet: bool = False) -> Any:
    """wandb.init for this run (a resumed run continues its W&B run), or one clear error.
    ``quiet`` (``--quiet``): W&B prints nothing either (its own lines, for this run only)."""
    import wandb

    w = cfg.logging.wandb
    if w.mode == "disabled":
        raise ConfigError("W&B logging needs logging.wandb.mode online or offline")
    wdir = run_dir / "wandb"
    wdir.mkdir(parents=True, exist_ok=True)
    id_file = wdir / ID_FILE
    run_id = id_file.read_text().strip() if resume and id_file.is_file() else None
    try:
        run = wandb.init(
            mode=w.mode, project=w.project, entity=w.entity, group=w.group,
            tags=list(w.tags) or None, name=w.name or run_dir.resolve().name, dir=str(run_dir),
            config=to_dict(cfg), id=run_id, resume="allow" if run_id else None, job_type="train",
            settings=wandb.Settings(silent=True) if quiet else None)
    except wandb.errors.Error as e:
        raise WandbError(f"W&B ({w.mode}) could not start: {why_not(e, w.mode)}") from None
    id_file.write_text(run.id)
    # every chart's x-axis is the population's env steps, not W&B's own call counter
    run.define_metric("env_steps")
    run.define_metric("*", step_metric="env_steps")
    return run


def why_not(e: Exception, mode: str) -> str:
    """W&B's error in one line, each sentence ending once; online, the way to log in is said
    once, after it (W&B's own advice to log in is left out)."""
    text = " ".join(str(e).split())
    said = [s for s in re.split(r"(?<=\.)\s+", text) if s]
    if mode == "online":
        said = [s for s in said if not re.search(r"log ?in", s, re.I)] or said[:1]
    why = " ".join(said).rstrip(".") or type(e).__name__
    return why + (". Log in with `wandb login` (or set WANDB_API_KEY), or run without an "
                  "account: --wandb offline." if mode == "online" else ".")


class WandbLogger(Logger):
    def __init__(self, cfg: Config, run_dir: Path, resume: bool = False, run: Any = None,
                 quiet: bool = False):
        """``run``: something with ``log(dict)`` and ``finish(exit_code=)`` instead of a W&B run
        (tests). ``quiet``: W&B prints nothing."""
        import wandb

        self.cfg, self.run_dir = cfg, run_dir
        self.run = run if run is not None else start_run(cfg, run_dir, resume, quiet)
        self.pending: dict[str, Any] | None = None
        self.members: dict[str, dict[str, Any]] = {}   # the generation being logged
        self.made_by: dict[str, str] = {}              # member id -> how it was made
        self.rows: list[list[Any]] = []                # the members table
        self.row_keys: list[str] = []
        self.records: list[dict[str, Any]] = []
        self.fitness: dict[tuple[int, str], float] = {}  # (generation, member id) -> fitness
        self.selected: dict[tuple[int, str], bool] = {}
        self.replaying = False
        self.generation = -1
        # the lineage while the run runs: each generation logs only its new rows
        self.live = wandb.Table(columns=LINEAGE_COLUMNS, log_mode="INCREMENTAL",
                                allow_mixed_types=True)
        self.added = 0                                   # records already in the live table
        if resume:
            self.replay()

    def replay(self) -> None:
        """A resumed run: rebuild the bookkeeping (lineage, tables) from the run's logs, which the
        W&B run already holds, without logging them again."""
        import wandb

        from evohpo.report.data import read_jsonl

        lineage: dict[int, list[dict[str, Any]]] = {}
        for r in read_jsonl(self.run_dir / "lineage.jsonl"):
            lineage.setdefault(int(r["generation"]), []).append(r)
        self.replaying = True
        try:
            for m in read_jsonl(self.run_dir / "metrics.jsonl"):
                self.log(m, int(m.get("env_steps", 0)))
                self.lineage(lineage.get(int(m.get("generation", -1)), []))
        finally:
            self.replaying = False
        # the earlier session put its records in the live table when it closed
        self.live = wandb.Table(columns=LINEAGE_COLUMNS, log_mode="INCREMENTAL",
                                allow_mixed_types=True)
        self.added = len(self.records)

    # ----------------------------------------------------------------------------- per generation
    def log(self, metrics: dict[str, Any], step: int) -> None:
        # held back until lineage(): the trainer logs a generation's metrics, then the records of
        # the selection that followed, and evo/survived needs both
        self._flush()
        gen = int(metrics.get("generation", self.generation + 1))
        self.members = member_fields(metrics)
        for mid, fields in self.members.items():
            self.made_by.setdefault(mid, "initial")
            if is_number(fields.get("fitness")):
                self.fitness[(gen, mid)] = float(fields["fitness"])
            # env_steps: the population's, as on every chart; member_env_steps: its lineage's own
            own = {("member_env_steps" if k == "env_steps" else k): v for k, v in fields.items()}
            row = {"generation": gen, "env_steps": step, "member": mid,
                   "made_by": self.made_by[mid], **own}
            for k in row:
                if k not in self.row_keys:
                    self.row_keys.append(k)
            self.rows.append([cell(row.get(k)) for k in self.row_keys])
        self.pending = {"env_steps": step, **generation_scalars(metrics, self.members)}
        self.generation = gen

    def lineage(self, records: list[dict[str, Any]]) -> None:
        if self.pending is not None and records:
            chosen = add_selection(self.pending, self.members, self.made_by, records)
            for mid in self.members:
                self.selected[(self.generation, mid)] = mid in chosen
        for r in records:
            self.made_by[str(r["member_id"])] = r["kind"]
        self.records.extend(records)
        # the previous generation's records now know what followed them: live on the dashboard
        if self._add_live_rows(self.generation) and self.pending is not None and not self.replaying:
            self.pending["lineage_live"] = self.live
        self._flush()

    def _flush(self) -> None:
        if self.pending is not None and not self.replaying:
            self.run.log(self.pending)
        self.pending = None

    def lineage_row(self, r: dict[str, Any]) -> list[Any]:
        """A record with what followed it: the child's fitness one generation later, the change
        from its parent's fitness, and whether the next selection kept it (None: not known yet)."""
        g, mid = int(r["generation"]), str(r["member_id"])
        parent = mid if r["kind"] == "elite" else str(r["parent_id"])
        before, after = self.fitness.get((g, parent)), self.fitness.get((g + 1, mid))
        delta = after - before if before is not None and after is not None else None
        return [cell(v) for v in (g, r["member_id"], r.get("parent_id"), r["kind"],
                                  r.get("target"), r.get("op"), r.get("before"), r.get("after"),
                                  before, after, delta, self.selected.get((g + 1, mid)),
                                  r.get("note"))]

    def _add_live_rows(self, upto: int | None) -> bool:
        """Put the records made before generation ``upto`` (all: None) into the live table."""
        fresh = [r for r in self.records[self.added:]
                 if upto is None or int(r["generation"]) < upto]
        for r in fresh:
            self.live.add_data(*self.lineage_row(r))
        self.added += len(fresh)
        return bool(fresh)

    # ----------------------------------------------------------------------------- at the end

    def close(self) -> None:
        import wandb

        # close() runs in the CLI's `finally`: an exception on its way out means the run failed
        # (or was interrupted, exit code 130), and W&B should show that rather than "finished"
        exc = sys.exc_info()[1]
        exit_code = 0 if exc is None else int(getattr(exc, "exit_code", 1))
        self._flush()
        try:
            if self._add_live_rows(None):  # the last selection's records: nothing followed them
                self.run.log({"lineage_live": self.live})
            # the whole lineage in one table (the live one needs W&B server >= 0.70)
            if self.records:
                rows = [self.lineage_row(r) for r in self.records]
                self.run.log({"lineage": wandb.Table(columns=LINEAGE_COLUMNS, data=rows,
                                                     allow_mixed_types=True)})
            if self.rows:
                width = len(self.row_keys)
                rows = [r + [None] * (width - len(r)) for r in self.rows]
                cols: list[Any] = list(self.row_keys)
                self.run.log({"members": wandb.Table(columns=cols, data=rows,
                                                     allow_mixed_types=True)})
            best = self.run_dir / "checkpoints" / "best.pt"
            if self.cfg.logging.wandb.checkpoint and best.is_file():
                self.run.log_artifact(self.best_artifact(best), aliases=["best"])
        finally:
            self.run.finish(exit_code=exit_code)

    def best_artifact(self, path: Path) -> Any:
        import wandb

        from evohpo import checkpoint

        meta, _ = checkpoint.load(path)
        member = meta.get("member", {})
        art = wandb.Artifact(f"best-{self.run.id}", type="model", metadata={
            "member": member.get("id"), "fitness": member.get("fitness"),
            "generation": meta.get("generation"), "env_steps": meta.get("env_steps"),
            "hyperparams": member.get("hyperparams"), "arch": member.get("arch"),
            "per_agent": member.get("per_agent")},
            description=f"best member ever seen in {self.run_dir.name}; "
                        "load with `evohpo eval RUN_DIR`")
        # immutable: the file is final now; W&B references it instead of copying it to its cache
        art.add_file(str(path), name="best.pt", policy="immutable")
        return art
