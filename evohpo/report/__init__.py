"""``evohpo report RUN [RUN ...] [--out report.html]``: one self-contained HTML page per sweep.

For one run: fitness against env steps and wall time, every member's hyperparameters and
architecture over time, the lineage tree, the fitness change that followed each mutation kind,
the final best settings as a reusable YAML config, and the run's config, versions and machine;
on a game of several teams also each team's fitness, the cross-play between the teams' members
and each team's champion against fixed references (:mod:`evohpo.report.teams`).
With several runs, first a comparison at equal env steps (seeds of one setting pooled as mean
and spread), then each run's report folded away. Built from the run directories' files only
(``config.yaml``, ``metrics.jsonl``, ``lineage.jsonl``, ``league.jsonl``, ``system.jsonl``,
``checkpoints/best.pt``), so it works on a finished run, a running one, or one copied from
another machine.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TypeVar

from evohpo import paths as paths_
from evohpo.errors import ConfigError
from evohpo.report.data import Run

P = TypeVar("P", bound=argparse.ArgumentParser)  # the CLI's parser class


def default_out(paths: list[Path]) -> Path:
    """One run: <run>/report.html. Several: report.html in their common parent directory."""
    if len(paths) == 1:
        return paths[0] / "report.html"
    return Path(os.path.commonpath([str(p.resolve()) for p in paths])) / "report.html"


def run_sections(run: Run, pre: str = "") -> list[tuple[str, str, str]]:
    """(id, title, html) of every section of one run's report; on a game of several teams, the
    Teams section comes after Fitness (html knows one population; teams builds on html)."""
    from evohpo.report import html, teams

    secs = html.run_sections(run, pre)
    body = teams.section(run)
    if body is None:
        return secs
    at = next(i for i, (sid, _, _) in enumerate(secs) if sid == pre + "fitness") + 1
    return [*secs[:at], (pre + "teams", "Teams", body), *secs[at:]]


def build_report(paths: list[Path], out: Path | None = None, title: str | None = None) -> Path:
    """Write the report of ``paths`` (run directories) to ``out``; returns where it went."""
    import matplotlib

    matplotlib.use("Agg")  # no display needed, and nothing from the network
    from evohpo.logs.loggers import atomic_write_text
    from evohpo.report import compare, html
    from evohpo.report.data import load_run

    if not paths:
        raise ConfigError("report: give at least one run directory")
    out = Path(out) if out else default_out([Path(p) for p in paths])
    if out.is_dir():
        out = out / "report.html"
    paths_.output_file(out, "report")  # a report that cannot be written is not built
    runs = [load_run(Path(p)) for p in paths]
    for r in runs:  # a run cut short mid-write: said, not silently left out
        for f in r.torn:
            print(f"evohpo: note: {str(f)!r}: dropped its torn last line (a run still writing, "
                  "or a file cut short); the report shows the lines before it", file=sys.stderr)
    names = [r.name for r in runs]
    for r in runs:  # two runs of the same name (from different sweeps): use their paths
        if names.count(r.name) > 1:
            r.name = str(r.path)
    if len(runs) == 1:
        secs = run_sections(runs[0])
        body = "".join(html.section(sid, t, b) for sid, t, b in secs)
        nav = [(sid, t) for sid, t, _ in secs]
        title = title or f"evohpo report: {runs[0].name}"
    else:
        mixed = compare.mixed_envs(runs)
        if mixed:  # said on the console too: the page's comparison may not be read closely
            print(f"evohpo: warning: {mixed}", file=sys.stderr)
        groups = compare.group_runs(runs)
        body = html.section("comparison", "Comparison", html.comparison(groups))
        nav = [("comparison", "Comparison")]
        for i, r in enumerate(runs):
            secs = run_sections(r, f"r{i}-")
            inner = "".join(html.section(sid, t, b) for sid, t, b in secs)
            body += (f"<section id='r{i}'><details><summary>Run {html.esc(r.name)}</summary>{inner}"
                     "</details></section>")
            nav.append((f"r{i}", r.name))
        title = title or f"evohpo report: {len(runs)} runs ({', '.join(g.label for g in groups)})"
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out, html.page(title, nav, body))
    return out


def cmd_report(args: argparse.Namespace) -> int:
    out = build_report([Path(p) for p in args.runs], Path(args.out) if args.out else None)
    print(f"wrote {out}")
    return 0


def add_parser(sub: argparse._SubParsersAction[P]) -> None:
    r = sub.add_parser("report", help="write an HTML report of one run, or a comparison of several")
    r.add_argument("runs", nargs="+", metavar="RUN_DIR", help="run directories (several: compared)")
    r.add_argument("--out", help="output file or directory (default: RUN_DIR/report.html, or "
                                 "report.html in the runs' common parent directory)")
    r.set_defaults(func=cmd_report)
