"""A run directory read into what the report shows: members per generation, their lineage, and
what followed each mutation.

Nothing here knows the hyperparameters, architecture keys or mutation kinds in advance: they
are discovered from ``metrics.jsonl`` (``member/<id>/<field>`` keys) and ``lineage.jsonl`` (the
records' ``kind``), so a new hyperparameter or mutation operator shows up without a change here.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from evohpo.errors import ConfigError

MEMBER_KEY = re.compile(r"member/([^/]+)/(.+)")
TEAM_KEY = re.compile(r"team/(.+)/(best_fitness|mean_fitness|champion)")
LAYERS = re.compile(r"\d+(-\d+)*")   # a hidden-layer spec such as "64-64"
LOSS = re.compile(r".*loss.*")
COUNTERS = ("env_steps",)            # member fields that only count
EVENTS = ("restored",)               # lineage records that happen to a member, not that make one


def read_jsonl(path: Path, torn: list[Path] | None = None) -> list[dict[str, Any]]:
    """The lines of a JSONL file; a missing file is empty, and a half-written last line (a run
    still writing, or one cut short) is skipped: ``path`` is appended to ``torn`` then."""
    if not path.is_file():
        return []
    out = []
    lines = path.read_text().splitlines()
    for i, line in enumerate(lines):
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            if torn is not None and i == len(lines) - 1:
                torn.append(path)
            continue
        if isinstance(obj, dict):
            out.append(obj)
    return out


def num(v: Any) -> float:
    """A logged number as float; None (JSON's NaN) and non-numbers as NaN."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return math.nan
    return float(v)


def layer_units(v: Any) -> float:
    """'64-32' -> 96 (total hidden units); NaN for anything else."""
    return (float(sum(int(w) for w in v.split("-")))
            if isinstance(v, str) and LAYERS.fullmatch(v) else math.nan)


@dataclass
class MemberGen:
    """One member as evaluated in one generation."""

    generation: int
    env_steps: int
    elapsed_s: float
    slot: int                      # its place in the population this generation (order logged)
    id: str
    fitness: float
    fields: dict[str, Any]         # every member/<id>/<field> logged, fitness included
    made_by: str = "initial"       # initial | elite (kept by elitism) | mutation kind that made it
    parent: str | None = None      # id of what it came from in the previous generation
    record: dict[str, Any] | None = None   # the lineage record that made it
    founder: str = ""              # its generation-0 ancestor
    selected: bool | None = None   # chosen as a parent or elite by the selection after it
                                   # (None: none ran)


@dataclass
class Outcome:
    """What followed one lineage record: the child's fitness one generation later vs its
    parent's."""

    record: dict[str, Any]
    kind: str
    detail: str
    parent_fitness: float
    fitness: float
    selected: bool | None

    @property
    def delta(self) -> float:
        return self.fitness - self.parent_fitness


@dataclass
class Run:
    path: Path
    name: str
    config: dict[str, Any]
    config_text: str
    metrics: list[dict[str, Any]]
    lineage: list[dict[str, Any]]
    system: list[dict[str, Any]]
    best_meta: dict[str, Any] | None
    league: list[dict[str, Any]] = field(default_factory=list)  # games of several teams only
    members: list[MemberGen] = field(default_factory=list)
    torn: list[Path] = field(default_factory=list)  # files whose torn last line was dropped
    at: dict[tuple[int, str], MemberGen] = field(default_factory=dict)

    @property
    def final(self) -> dict[str, Any]:
        return self.metrics[-1]

    def team_names(self) -> list[str]:
        """The teams its metrics name (games of several teams), in the order logged."""
        return list(dict.fromkeys(m.group(1) for row in self.metrics for k in row
                                  if (m := TEAM_KEY.fullmatch(k))))

    def generations(self) -> list[int]:
        return [int(m["generation"]) for m in self.metrics]

    def final_best(self) -> MemberGen:
        """The best member of the last evaluated generation."""
        last = [m for m in self.members if m.generation == self.members[-1].generation]
        best = str(self.final.get("eval/best_member", ""))
        return next((m for m in last if m.id == best),
                    max(last, key=lambda m: -math.inf if math.isnan(m.fitness) else m.fitness))

    def ancestry(self, m: MemberGen) -> list[MemberGen]:
        """``m`` and its ancestors back to generation 0, oldest first."""
        chain = [m]
        while (chain[-1].parent is not None
               and (chain[-1].generation - 1, chain[-1].parent) in self.at):
            chain.append(self.at[(chain[-1].generation - 1, chain[-1].parent)])
        return chain[::-1]

    def seed(self) -> int | None:
        return self.config.get("seed")


def load_run(path: Path) -> Run:
    path = Path(path)
    cfg_path = path / "config.yaml"
    if not cfg_path.is_file():
        raise ConfigError(f"{str(path)!r} is not a run directory (no config.yaml in it)")
    text = cfg_path.read_text()
    torn: list[Path] = []
    metrics = read_jsonl(path / "metrics.jsonl", torn)
    if not metrics:
        raise ConfigError(f"run {str(path)!r} has no generations in metrics.jsonl yet; "
                          "a report needs at least one evaluation")
    run = Run(path=path, name=path.resolve().name, config=yaml.safe_load(text) or {},
              config_text=text, metrics=continuous_time(metrics),
              lineage=read_jsonl(path / "lineage.jsonl", torn), torn=torn,
              system=read_jsonl(path / "system.jsonl"), best_meta=best_checkpoint_meta(path),
              league=read_jsonl(path / "league.jsonl"))
    link_members(run)
    return run


def continuous_time(metrics: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Wall time summed over sessions: a resumed run's clock starts again from zero."""
    offset, last, out = 0.0, 0.0, []
    for m in metrics:
        t = num(m.get("time/elapsed_s"))
        if math.isfinite(t):
            if t + offset < last:
                offset = last
            last = t + offset
            m = {**m, "time/elapsed_s": last}
        out.append(m)
    return out


def best_checkpoint_meta(path: Path) -> dict[str, Any] | None:
    p = path / "checkpoints" / "best.pt"
    if not p.is_file():
        return None
    from evohpo import checkpoint

    try:
        return checkpoint.load(p)[0]
    except checkpoint.CheckpointError:
        return None


def link_members(run: Run) -> None:
    """Members per generation, each linked to its parent by the lineage records."""
    records: dict[int, list[dict[str, Any]]] = {}
    for r in run.lineage:
        if r["kind"] not in EVENTS:
            records.setdefault(int(r["generation"]), []).append(r)
    prev: dict[str, MemberGen] = {}
    for row in run.metrics:
        g = int(row["generation"])
        fields: dict[str, dict[str, Any]] = {}
        for k, v in row.items():
            m = MEMBER_KEY.fullmatch(k)
            if m:
                fields.setdefault(m.group(1), {})[m.group(2)] = v
        made = {str(r["member_id"]): r for r in records.get(g - 1, []) if r["kind"] != "elite"}
        current = {}
        for slot, (mid, f) in enumerate(fields.items()):
            mg = MemberGen(generation=g, env_steps=int(row.get("env_steps", 0)),
                           elapsed_s=num(row.get("time/elapsed_s")), slot=slot, id=mid,
                           fitness=num(f.get("fitness")), fields=f)
            if mid in made:
                mg.record, mg.made_by, mg.parent = (made[mid], str(made[mid]["kind"]),
                                                    str(made[mid]["parent_id"]))
            elif mid in prev:
                mg.made_by, mg.parent = "elite", mid
            mg.founder = prev[mg.parent].founder if mg.parent in prev else mid
            current[mid] = mg
            run.members.append(mg)
            run.at[(g, mid)] = mg
        if records.get(g):
            chosen = {str(r["member_id"] if r["kind"] == "elite" else r["parent_id"])
                      for r in records[g]}
            for mg in current.values():
                mg.selected = mg.id in chosen
        prev = current


# ----------------------------------------------------------------------------- what the fields are

@dataclass
class Fields:
    hyperparameters: list[str]   # numeric, evolving settings (in the config, or mutated)
    architecture: list[str]      # size: params, hidden-layer specs, other numeric fields
    categorical: list[str]       # other strings (e.g. activation/<agent>)
    losses: list[str]


def classify(run: Run) -> Fields:
    """Sort the member fields found in the logs into hyperparameters, architecture, losses."""
    seen: dict[str, set[str]] = {}
    for m in run.members:
        for k, v in m.fields.items():
            if v is not None:
                seen.setdefault(k, set()).add("layers" if isinstance(v, str) and LAYERS.fullmatch(v)
                                              else type(v).__name__)
    known = (list(run.config.get("mutation", {}).get("bounds", {}))
             + list(run.config.get("algo", {})))
    mutated = [str(r.get("target")) for r in run.lineage if r.get("kind") == "hyperparameters"]
    hps, arch, cats, losses = [], [], [], []
    for k, types in seen.items():
        if k == "fitness" or k in COUNTERS:
            continue
        if types <= {"int", "float"}:
            if LOSS.fullmatch(k):
                losses.append(k)
            elif k in known or k in mutated:
                hps.append(k)
            else:
                arch.append(k)
        elif types == {"layers"}:
            arch.append(k)
        else:
            cats.append(k)
    order = {k: i for i, k in enumerate(dict.fromkeys(known + mutated))}
    hps.sort(key=lambda k: order.get(k, len(order)))
    return Fields(hps, arch, cats, losses)


def value(m: MemberGen, key: str) -> float:
    """A field as a number for plotting: hidden-layer specs as their total units."""
    v = m.fields.get(key)
    return layer_units(v) if isinstance(v, str) else num(v)


# ----------------------------------------------------------------------------- mutation outcomes

def detail(r: dict[str, Any]) -> str:
    """What a record did, coarse enough to pool: 'lr_actor up', 'add_node', 'tanh', ''."""
    kind, target, op = r.get("kind"), str(r.get("target") or ""), str(r.get("op") or "")
    if kind == "hyperparameters" and target:
        b, a = num(r.get("before")), num(r.get("after"))
        return (f"{target} {'up' if a > b else 'down'}"
                if not (math.isnan(a) or math.isnan(b)) else target)
    if kind == "activation" and isinstance(r.get("after"), str):
        return str(r["after"])
    return op.split()[0] if op and kind not in ("weights", "none", "elite") else ""


def outcomes(run: Run) -> list[Outcome]:
    """For every record whose child was evaluated: its fitness next generation vs its parent's now.

    The elite's row compares the same member one generation apart, and ``none`` (a clone left
    as it was) is the control: training alone moves fitness by about that much.
    """
    out = []
    for r in run.lineage:
        if r["kind"] in EVENTS:
            continue
        g, mid = int(r["generation"]), str(r["member_id"])
        parent = mid if r["kind"] == "elite" else str(r["parent_id"])
        p, c = run.at.get((g, parent)), run.at.get((g + 1, mid))
        if p is None or c is None:
            continue
        out.append(Outcome(r, str(r["kind"]), detail(r), p.fitness, c.fitness, c.selected))
    return out
