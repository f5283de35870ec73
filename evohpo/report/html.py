"""The report page: one self-contained HTML file (CSS inline, plots as data: URIs, no scripts)."""

from __future__ import annotations

import html
import json
import math
import statistics
import time
from typing import Any

from evohpo.report import compare as K
from evohpo.report import plots
from evohpo.report.best import best_config
from evohpo.report.data import Outcome, Run, classify, num, outcomes

CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:0;color:#222}
main{max-width:1300px;margin:0 auto;padding:0 24px 48px}
header{background:#1f2a36;color:#eee;padding:14px 24px}header h1{margin:0;font-size:20px}
nav{padding:8px 24px;background:#eef1f4;position:sticky;top:0;z-index:1;font-size:13px}
nav a{margin-right:14px;color:#1f4e79;text-decoration:none}
h2{border-bottom:2px solid #dde3e8;padding-bottom:4px;margin-top:36px}
table{border-collapse:collapse;margin:8px 0;font-size:13px}
td,th{border:1px solid #d6dbe0;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f3f5f7}td.n{text-align:right;font-variant-numeric:tabular-nums}
figure{margin:12px 0}figure img{max-width:100%;border:1px solid #e3e6ea}
figcaption{color:#555;font-size:12.5px;max-width:1000px}
pre{background:#f6f8fa;border:1px solid #e1e4e8;padding:10px;overflow:auto;font-size:12.5px}
.muted{color:#777}.good{color:#18794e}.bad{color:#b42318}details{margin:10px 0}
summary{cursor:pointer;font-weight:600}
"""


def esc(v: Any) -> str:
    return html.escape(str(v))


def fmt(v: Any, digits: int = 4) -> str:
    if isinstance(v, bool) or v is None:
        return "" if v is None else str(v)
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        return "nan" if math.isnan(v) else f"{v:.{digits}g}"
    if isinstance(v, (list, dict)):
        return json.dumps(v)
    return str(v)


def table(head: list[str] | None, rows: list[list[Any]]) -> str:
    def td(v: Any) -> str:
        num_like = isinstance(v, (int, float)) and not isinstance(v, bool)
        return f"<td class='n'>{esc(fmt(v))}</td>" if num_like else f"<td>{esc(fmt(v))}</td>"

    top = "<tr>" + "".join(f"<th>{esc(h)}</th>" for h in head) + "</tr>" if head else ""
    return ("<table>" + top
            + "".join("<tr>" + "".join(td(v) for v in r) + "</tr>" for r in rows) + "</table>")


def figure(p: plots.Plot | None) -> str:
    if p is None:
        return "<p class='muted'>nothing logged for this yet</p>"
    return (f"<figure class='plot' data-points='{p.points}'><img alt='{esc(p.caption[:80])}' "
            f"src='data:image/png;base64,{p.png}'><figcaption>{esc(p.caption)}</figcaption></figure>")


def section(sid: str, title: str, body: str) -> str:
    return f"<section id='{sid}'><h2>{esc(title)}</h2>{body}</section>"


def page(title: str, nav: list[tuple[str, str]], body: str) -> str:
    links = "".join(f"<a href='#{sid}'>{esc(t)}</a>" for sid, t in nav)
    return ("<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
            f"<title>{esc(title)}</title><style>{CSS}</style></head><body><header>"
            f"<h1>{esc(title)}</h1><div class='muted'>made by evohpo report, "
            f"{esc(time.strftime('%Y-%m-%d %H:%M'))}</div></header>"
            f"<nav>{links}</nav><main>{body}</main></body></html>")


# ----------------------------------------------------------------------------- one run

SECTIONS = [("summary", "Summary"), ("fitness", "Fitness"), ("hyperparameters", "Hyperparameters"),
            ("architecture", "Architecture"), ("training", "Training"), ("lineage", "Lineage"),
            ("mutations", "Mutations"), ("best-config", "Best configuration"), ("config", "Config"),
            ("system", "Versions and machine")]


def run_sections(run: Run, pre: str = "") -> list[tuple[str, str, str]]:
    """(id, title, html) of every section of one run's report; ids get ``pre`` in front."""
    f = classify(run)
    outs = outcomes(run)
    s = {
        "summary": summary(run),
        "fitness": figure(plots.fitness(run)),
        "hyperparameters": figure(plots.trajectories(
            run, f.hyperparameters, "Each evolving hyperparameter of every member at every "
            "evaluation, joined to the value of the member it was cloned from (colour: founding "
            "lineage). Black: the final best member's ancestry. Jumps are mutations; flat runs "
            "are inherited values.")),
        "architecture": figure(plots.trajectories(
            run, f.architecture, "Architecture (and any other per-member value) of every "
            "member: parameter count and total hidden units of each network, joined to the "
            "member it was cloned from (black: the final best member's ancestry)."))
            + (figure(plots.trajectories(
                run, f.categorical, "Categorical settings of every member (e.g. activations).",
                categorical=True))
               if f.categorical else ""),
        "training": figure(plots.training(run, f.losses)),
        "lineage": figure(plots.lineage_tree(run)) + ancestry(run) + records_table(run, outs),
        "mutations": figure(plots.mutation_effects(outs)) + mutation_table(outs),
        "best-config": best_section(run),
        "config": f"<p>{esc(run.path / 'config.yaml')}</p><pre>{esc(run.config_text)}</pre>",
        "system": system(run),
    }
    return [(pre + sid, title, s[sid]) for sid, title in SECTIONS]


def summary(run: Run) -> str:
    fm = run.final
    c = run.config
    steps, wall = int(fm.get("env_steps", 0)), num(fm.get("time/elapsed_s"))
    best = run.final_best()
    teams = run.team_names()
    rows = [["run directory", str(run.path)],
            ["algorithm / env",
             f"{c.get('algo', {}).get('name')} on {c.get('env', {}).get('name')}"],
            ["population", f"{c.get('population', {}).get('size')}"
                           + (f" per team ({', '.join(teams)})" if teams else "")],
            ["generations", len(run.metrics)], ["env steps", steps],
            ["wall time", f"{wall / 60:.1f} min" if math.isfinite(wall) else "n/a"],
            ["env steps / s (overall)", steps / wall if wall and math.isfinite(wall) else math.nan],
            *(team_rows(fm, teams) if teams else
              [["final best fitness", f"{best.fitness:.3f} (member {best.id})"],
               ["final mean fitness", num(fm.get("eval/mean_fitness"))],
               ["kept member (fresh episodes)", num(fm.get("eval/best_ever"))]]),
            ["mutations",
             ", ".join(f"{k}: {n}" for k, n in kind_counts(run).items()) or "none yet"]]
    return table(None, rows)


def team_rows(fm: dict[str, Any], teams: list[str]) -> list[list[Any]]:
    """A game of several teams: each team's champion and fitness (cross-play: relative to the
    other teams' members of that generation)."""
    return [[f"{t}: champion, best / mean fitness",
             f"member {fm.get(f'team/{t}/champion')}, {num(fm.get(f'team/{t}/best_fitness')):.3f}"
             f" / {num(fm.get(f'team/{t}/mean_fitness')):.3f}"] for t in teams]


def kind_counts(run: Run) -> dict[str, int]:
    out: dict[str, int] = {}
    for r in run.lineage:
        out[str(r["kind"])] = out.get(str(r["kind"]), 0) + 1
    return out


def ancestry(run: Run) -> str:
    chain = run.ancestry(run.final_best())
    rows = []
    for m in chain:
        r = m.record or {}
        change = (f"{r.get('target', '')} {fmt(r.get('before'))} → {fmt(r.get('after'))}"
                  if r.get("target") else "")
        rows.append([m.generation, m.env_steps, m.id, m.parent or "", m.made_by, r.get("op", ""),
                     change.strip(), m.fitness])
    return ("<h3>How the final best member came to be</h3>"
            + table(["generation", "env steps", "member", "from", "made by", "op", "change",
                     "fitness"], rows))


def records_table(run: Run, outs: list[Outcome]) -> str:
    follow = {id(o.record): o for o in outs}
    rows = []
    for r in run.lineage[:3000]:
        o = follow.get(id(r))
        rows.append([r.get("generation"), r.get("member_id"), r.get("parent_id"), r.get("kind"),
                     r.get("target"), r.get("op"), r.get("before"), r.get("after"),
                     o.parent_fitness if o else None, o.fitness if o else None,
                     o.delta if o else None, o.selected if o else None])
    more = f" (first 3,000 of {len(run.lineage):,})" if len(run.lineage) > 3000 else ""
    return (f"<details><summary>Every lineage record{more}</summary>"
            + table(["gen", "member", "parent", "kind", "target", "op", "before", "after",
                     "parent fitness", "fitness next", "change", "kept next"], rows) + "</details>")


def mutation_table(outs: list[Outcome]) -> str:
    if not outs:
        return "<p class='muted'>no mutation has been followed by an evaluation yet</p>"
    base = [o.delta for o in outs if o.kind == "none" and math.isfinite(o.delta)]
    control = statistics.fmean(base) if base else math.nan
    groups: dict[tuple[str, str], list[Outcome]] = {}
    for o in outs:
        groups.setdefault((o.kind, ""), []).append(o)
        if o.detail:
            groups.setdefault((o.kind, o.detail), []).append(o)
    rows = []
    for (kind, det), os_ in sorted(groups.items(), key=lambda kv: (list(dict.fromkeys(
            o.kind for o in outs)).index(kv[0][0]), kv[0][1])):
        d = [o.delta for o in os_ if math.isfinite(o.delta)]
        kept = [o.selected for o in os_ if o.selected is not None]
        mean = statistics.fmean(d) if d else math.nan
        rows.append([kind if not det else "", det, len(os_), mean,
                     statistics.median(d) if d else math.nan,
                     f"{sum(x > 0 for x in d) / len(d):.0%}" if d else "",
                     f"{sum(kept) / len(kept):.0%}" if kept else "", mean - control])
    return ("<p>Change = the child's fitness at the next evaluation minus its parent's at "
            "selection. Training alone moves it too: compare each kind with <b>none</b> (an "
            "unmutated clone), last column.</p>"
            + table(["kind", "detail", "n", "mean change", "median", "improved",
                     "kept by next selection", "mean minus none"], rows))


def best_section(run: Run) -> str:
    text, error = best_config(run)
    note = (f"<p class='bad'>This YAML does not load as a config: {esc(error)}</p>" if error else
            "<p>Loads as a valid config: save it and run "
            "<code>evohpo train --config best.yaml</code>.</p>")
    extra = ""
    meta = run.best_meta
    if meta and isinstance(meta.get("member"), dict):
        m = meta["member"]
        hp = m.get("hyperparams") or {}
        arch = m.get("arch") or {}
        extra = ("<h3>Best member ever seen (checkpoints/best.pt)</h3>"
                 f"<p>member {esc(m.get('id'))}, fitness {esc(fmt(num(m.get('fitness'))))} "
                 f"at generation {esc(meta.get('generation'))}, "
                 f"{esc(fmt(meta.get('env_steps')))} env steps. "
                 f"<code>evohpo eval {esc(run.path)}</code> replays it.</p>"
                 + table(list(hp), [list(hp.values())])
                 + table(["agent", "architecture"], [[a, v] for a, v in arch.items()]))
    return note + f"<pre class='yaml' id='{esc(run.name)}-yaml'>{esc(text)}</pre>" + extra


def system(run: Run) -> str:
    if not run.system:
        return ("<p class='muted'>no system.jsonl in the run directory (written by evohpo since "
                "reports)</p>")
    rows = []
    for s in run.system:
        v = s.get("versions", {})
        cpu = f"{s.get('cpu')} ({s.get('cpu_count')} cores)"
        if s.get("machine"):  # what decides the arithmetic: a run repeats exactly on one kind
            cpu += f"; {s['machine']}"
        rows.append([s.get("time"), s.get("host"), cpu,
                     f"{s.get('memory_gb')} GiB", ", ".join(s.get("gpus") or []) or "none",
                     s.get("platform"), ", ".join(f"{k} {x}" for k, x in v.items() if x),
                     " ".join(s.get("argv") or [])])
    return ("<p>One row per process that wrote to the run (a resumed run adds a row).</p>"
            + table(["started", "host", "cpu", "memory", "gpus", "platform", "versions",
                     "command"], rows))


# ----------------------------------------------------------------------------- several runs

def comparison(groups: list[K.Group]) -> str:
    runs = [r for g in groups for r in g.runs]
    steps = K.common_steps(runs)
    refs = K.reference_keys(runs)
    cv = ({f"{name} vs env steps": K.curves(groups, k) for name, k in refs.items()} if refs else
          {"kept member (fresh episodes) vs env steps": K.curves(groups, "eval/best_ever"),
           "best fitness vs env steps": K.curves(groups, "eval/best_fitness"),
           "population mean fitness vs env steps": K.curves(groups, "eval/mean_fitness"),
           "best fitness vs wall time": K.curves(groups, "eval/best_fitness", "time/elapsed_s",
                                                 60.0)})
    mixed = K.mixed_envs(runs)
    body = f"<p class='bad'>Warning: {esc(mixed)}.</p>" if mixed else ""
    body += figure(plots.compare(cv, "Each group's runs (faint) and their mean (bold) with a ±1 "
                                     "std band over seeds. Runs are compared at equal env steps."))
    sc, names = K.scores(groups, steps, refs), K.metrics_for(refs)
    body += f"<h3>At {steps:,} env steps (reached by every run)</h3>"
    body += table(["group", "runs", *names],
                  [[g.label, ", ".join(r.name for r in g.runs),
                    *(str(sc[g.label][k]) for k in names)] for g in groups])
    body += ("<p class='muted'>"
             + "; ".join(f"<b>{esc(k)}</b>: {esc(v)}" for k, v in names.items()) + "</p>")
    ref = groups[0]
    for g in groups[1:]:
        rows = []
        for d in K.deltas(ref, g, steps, refs):
            cls = "good" if d.diff > 0 else "bad"
            se = f" ± {d.se:.2f} (s.e.)" if math.isfinite(d.se) else ""
            ps = d.paired_stat
            half = K.t95(ps.n - 1) * ps.std / math.sqrt(ps.n) if ps.n > 1 else math.nan
            paired = (f"{ps.mean:+.2f} ± {ps.std / math.sqrt(ps.n):.2f} (s.e., n={ps.n}); 95% "
                      f"CI [{ps.mean - half:+.2f}, {ps.mean + half:+.2f}]"
                      if ps.n > 1 else f"{ps.mean:+.2f}" if ps.n else "no shared seeds")
            rows.append([esc(d.metric), f"<span class='{cls}'>{d.diff:+.2f}</span>{se}",
                         esc(paired), esc(", ".join(f"{x:+.2f}" for x in d.paired))])
        body += (f"<h3>{esc(g.label)} minus {esc(ref.label)}</h3>"
                 "<p>Runs of one seed start from the same networks and, generation by "
                 "generation, meet the same evaluation episodes, so the paired difference (same "
                 "seed, both settings) is usually the sharper comparison.</p>"
                 + raw_table(["metric", "difference of means", "paired difference", "per seed"],
                             rows))
    body += "<h3>Final best member of each run</h3>" + winners(groups)
    diff = K.config_diff(groups)
    body += "<h3>How the groups' configs differ</h3>" + (
        table(["key", *(g.label for g in groups)], [[k, *vals] for k, vals in diff]) if diff
        else "<p>Only in seed (and logging).</p>")
    return body


def raw_table(head: list[str], rows: list[list[str]]) -> str:
    """A table whose cells are HTML already (escaped by the caller)."""
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>" for r in rows)
    return "<table><tr>" + "".join(f"<th>{esc(h)}</th>" for h in head) + f"</tr>{body}</table>"


def winners(groups: list[K.Group]) -> str:
    """Each run's final best member: its fitness, hyperparameters and architecture, side by side."""
    rows, keys = [], []
    for g in groups:
        for r in g.runs:
            f = classify(r)
            for k in f.hyperparameters + f.architecture + f.categorical:
                if k not in keys:
                    keys.append(k)
    for g in groups:
        for r in g.runs:
            m = r.final_best()
            rows.append([g.label, r.name, m.id, m.fitness, *(m.fields.get(k) for k in keys)])
    return table(["group", "run", "member", "fitness", *keys], rows)
