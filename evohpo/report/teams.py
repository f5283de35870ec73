"""The report's "Teams" section, for games of several teams (``games.teams: auto`` on
simple_tag, simple_adversary, ...): each team's fitness and its members' ratings, the last
generation's cross-play between the teams' members (``league.jsonl``), and each team's champion
against the fixed references over time (``vs/<team>/<ref>`` beside ``vs/<team>/<ref>/ref``).

It reads back what :mod:`evohpo.games.league` writes: the team names from the ``team/<team>/...``
metrics, in the env's order of teams, which is also the order of a match's members in
``league.jsonl``; a member's team from its lineage records, or else from the seat it played in.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
from matplotlib.collections import LineCollection
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from evohpo.report import plots
from evohpo.report.data import Run, num
from evohpo.report.html import esc, figure, fmt, raw_table, table

REF_ROWS = 20  # generations in the references table: every one up to this many, else a sample
STAR = "★"     # marks each team's champion


class Match(NamedTuple):
    members: tuple[str, ...]     # one member id per team, in the order of the teams
    returns: tuple[float, ...]   # each team's mean return in the match (NaN: a diverged member)


class CrossPlay(NamedTuple):
    generation: int
    matches: list[Match]
    champions: list[str]         # each team's champion that generation ('' where not logged)


@dataclass
class Teams:
    """What the report knows of a run's teams, read from its logs."""

    names: list[str]             # in the env's order: the order of a match's members
    member_team: dict[str, str]  # member id -> its team
    refs: list[str]              # the references the champions played, as logged
    elo: bool                    # fitness is an Elo rating (games.fitness: elo)

    def color(self, team: str) -> str:
        return f"C{self.names.index(team) % 10}" if team in self.names else "grey"


def is_team_run(run: Run) -> bool:
    return bool(run.league) or any(k.startswith("team/") for row in run.metrics for k in row)


def read_teams(run: Run) -> Teams:
    """The teams' names, each member's team and the references played, from whichever of the
    run's files has them (a run may be cut short before writing one)."""
    names = run.team_names()
    # a run cut short before its first metrics line with teams: lineage records name them
    for r in run.lineage:
        if r.get("team") is not None and str(r["team"]) not in names:
            names.append(str(r["team"]))
    width = max((len(mt) for line in run.league for mt in line.get("matches") or []), default=0)
    names += [f"team {t}" for t in range(len(names), width)]  # seats no other file names
    member_team = {str(r["member_id"]): str(r["team"]) for r in run.lineage
                   if r.get("team") is not None and r.get("member_id") is not None}
    for line in run.league:  # a match's members sit in the order of the teams
        for mt in line.get("matches") or []:
            for t, mid in enumerate(mt):
                member_team.setdefault(str(mid), names[t])
    for row in run.metrics:
        for team in names:
            if row.get(f"team/{team}/champion") is not None:
                member_team.setdefault(str(row[f"team/{team}/champion"]), team)
    refs: list[str] = []
    for row in run.metrics:
        for k in row:
            for team in names:
                ref = k[len(f"vs/{team}/"):].removesuffix("/ref")
                if k.startswith(f"vs/{team}/") and ref and ref not in refs:
                    refs.append(ref)
    elo = (run.config.get("games", {}).get("fitness") == "elo"
           or any("rating" in m.fields for m in run.members))
    return Teams(names, member_team, refs, elo)


def champion(row: dict[str, Any], team: str) -> str:
    v = row.get(f"team/{team}/champion")
    return "" if v is None else str(v)


def cross_play(run: Run, teams: Teams) -> CrossPlay | None:
    """The matches of the last generation in metrics.jsonl: league.jsonl's last line up to it (a
    resumed run repeats a generation; a run stopped between writing the two files has
    league.jsonl one ahead)."""
    if not run.league:
        return None
    g = int(run.final["generation"])
    line = next((ln for ln in reversed(run.league) if num(ln.get("generation")) <= g),
                run.league[-1])
    g = int(line.get("generation", g))
    row: dict[str, Any] = next((r for r in reversed(run.metrics) if r.get("generation") == g),
                               {})
    returns = line.get("team_returns") or []
    matches = [Match(tuple(str(i) for i in mt),
                     tuple(num(x) for x in (returns[k] if k < len(returns) else [None] * len(mt))))
               for k, mt in enumerate(line.get("matches") or [])]
    return CrossPlay(g, matches, [champion(row, t) for t in teams.names])


def sample_rows(n: int, k: int = REF_ROWS) -> list[int]:
    """Which of ``n`` generations the references table shows: all up to ``k``, else ``k`` evenly
    spaced ones, the first and the last among them."""
    if n <= k:
        return list(range(n))
    return sorted({round(i * (n - 1) / (k - 1)) for i in range(k)})


def short(v: float) -> str:
    """A return for a table cell: one decimal (two below 1), never an exponent."""
    if not math.isfinite(v):
        return "n/a"
    return f"{v:.0f}" if abs(v) >= 100 else f"{v:.1f}" if abs(v) >= 1 or v == 0 else f"{v:.2f}"


# ----------------------------------------------------------------------------- figures

def fitness_plot(run: Run, teams: Teams) -> plots.Plot:
    """One panel per team (their fitness scales differ): best, mean and every member."""
    fig, axes = plots.grid(len(teams.names), cols=3, w=5.0, h=3.4)
    x = [num(r.get("env_steps")) for r in run.metrics]
    for ax, team in zip(axes, teams.names, strict=True):
        color = teams.color(team)
        ms = [m for m in run.members if teams.member_team.get(m.id) == team]
        ax.scatter([m.env_steps for m in ms], [m.fitness for m in ms], s=12, alpha=0.5,
                   color=color, label="members")
        ax.plot(x, [num(r.get(f"team/{team}/mean_fitness")) for r in run.metrics], "--",
                color=color, lw=1.5, label="mean")
        ax.plot(x, [num(r.get(f"team/{team}/best_fitness")) for r in run.metrics], "-",
                color="k", lw=2, label="best (the champion)")
        ax.set_title(team, fontsize=9)
        ax.set_ylabel("Elo rating" if teams.elo else "fitness (own team's return)")
        plots.steps_axis(ax)
        ax.legend(fontsize=8, loc="best")
    return plots.render(fig, "Each team's fitness against env steps: its best member (the "
                             "champion), its mean, and every member (dots). Fitness comes from "
                             "the team's own returns in cross-play against the other team's "
                             "members, so a team can stay flat while both improve.")


def ratings_plot(run: Run, teams: Teams) -> plots.Plot | None:
    """Every member's Elo rating, joined to the member it was cloned from, coloured by team."""
    rated = [m for m in run.members if math.isfinite(num(m.fields.get("rating")))]
    if not rated:
        return None
    fig = Figure(figsize=(8.0, 3.6), layout="constrained")
    ax = fig.add_subplot()
    segs, cols = [], []
    for m in rated:
        p = run.at.get((m.generation - 1, m.parent)) if m.parent is not None else None
        if p is not None and math.isfinite(num(p.fields.get("rating"))):
            segs.append([(p.env_steps, num(p.fields["rating"])),
                         (m.env_steps, num(m.fields["rating"]))])
            cols.append(teams.color(teams.member_team.get(m.id, "")))
    ax.add_collection(LineCollection(segs, colors=cols, linewidths=1.2, alpha=0.7))
    ax.scatter([m.env_steps for m in rated], [num(m.fields["rating"]) for m in rated], s=14,
               c=[teams.color(teams.member_team.get(m.id, "")) for m in rated])
    ax.autoscale_view()
    ax.set_ylabel("Elo rating")
    plots.steps_axis(ax)
    ax.legend(handles=[Line2D([], [], color=teams.color(t), marker="o", label=t)
                       for t in teams.names], fontsize=8, loc="best")
    return plots.render(fig, "Every member's Elo rating at every evaluation, joined to the member "
                             "it was cloned from; colour: team. A rating moves only with the "
                             "results of matches against the other team.")


def references_plot(run: Run, teams: Teams) -> plots.Plot | None:
    """One panel per team: its champion against each reference (solid), and the reference's own
    return in that seat (dashed): the bar to clear."""
    if not teams.refs:
        return None
    fig, axes = plots.grid(len(teams.names), cols=3, w=5.0, h=3.4)
    x = [num(r.get("env_steps")) for r in run.metrics]
    for ax, team in zip(axes, teams.names, strict=True):
        for i, ref in enumerate(teams.refs):
            key = f"vs/{team}/{ref}"
            ys = [num(r.get(key)) for r in run.metrics]
            bar = [num(r.get(key + "/ref")) for r in run.metrics]
            if np.isfinite(ys).any():
                ax.plot(x, ys, "o-", ms=3, color=f"C{i % 10}", lw=1.6, label=f"champion vs {ref}")
            if np.isfinite(bar).any():
                ax.plot(x, bar, "--", color=f"C{i % 10}", lw=1.2, label=f"{ref} itself")
        ax.set_title(f"{team}: own team's return", fontsize=9)
        plots.steps_axis(ax)
        if ax.lines:
            ax.legend(fontsize=7, loc="best")
    return plots.render(fig, "Each team's champion against fixed opponents on the same episodes "
                             "every generation (solid): a random policy, the scripted heuristic "
                             "where the game has one, and the first generation's champions. "
                             "Dashed: the reference's own return in the champion's seat against "
                             "the same opponents: the champion beats that reference where its "
                             "solid line is above the dashed one.")


# ----------------------------------------------------------------------------- tables

def overview(run: Run, teams: Teams) -> str:
    row = run.final
    rows = [[team, champion(row, team), num(row.get(f"team/{team}/best_fitness")),
             num(row.get(f"team/{team}/mean_fitness")),
             sum(1 for m in run.members
                 if m.generation == int(row["generation"]) and teams.member_team.get(m.id) == team)]
            for team in teams.names]
    fit = "Elo rating" if teams.elo else "mean own-team return in cross-play"
    return (f"<p>Each team evolves its own population; a member's fitness is its {esc(fit)}. "
            f"Generation {esc(row['generation'])}:</p>"
            + table(["team", "champion", "champion's fitness", "mean fitness", "members"], rows))


def member_label(mid: str, cp: CrossPlay, t: int, run: Run) -> str:
    m = run.at.get((cp.generation, mid))
    star = f" {STAR}" if mid == cp.champions[t] else ""
    fit = f" (fitness {fmt(m.fitness)})" if m is not None else ""
    return f"<b>{esc(f'member {mid}{star}')}</b>{esc(fit)}"


def cross_play_html(run: Run, teams: Teams) -> str:
    cp = cross_play(run, teams)
    if cp is None or not cp.matches:
        return "<p class='muted'>no league.jsonl in the run directory yet</p>"
    names = teams.names
    champs = ", ".join(f"{n}: member {c or '?'}" for n, c in zip(names, cp.champions, strict=True))
    head = (f"<p>The matches of generation {esc(cp.generation)}, each on the same "
            f"{esc(run.config.get('eval', {}).get('episodes', ''))} episodes. {STAR}: the "
            f"team's champion ({esc(champs)}).")
    if len(names) == 2:
        rows_ = list(dict.fromkeys(m.members[0] for m in cp.matches))
        cols = list(dict.fromkeys(m.members[1] for m in cp.matches))
        cell = {(m.members[0], m.members[1]): m.returns for m in cp.matches}
        body = []
        for r in rows_:
            line = [member_label(r, cp, 0, run)]
            for c in cols:
                ret = cell.get((r, c))
                text = esc(" / ".join(short(v) for v in ret)) if ret else ""
                both = r == cp.champions[0] and c == cp.champions[1]
                line.append(f"<b>{text}</b>" if both and text else text)
            body.append(line)
        return (head + f" Rows: the members of {esc(names[0])}; columns: those of "
                f"{esc(names[1])}. Each cell: the return of {esc(names[0])} / of "
                f"{esc(names[1])} in that match "
                "(bold: the champions' match; n/a: a diverged member played; empty: the "
                "two did not meet).</p>"
                + raw_table([f"{names[0]} \\ {names[1]}",
                             *(f"member {c}{f' {STAR}' if c == cp.champions[1] else ''}"
                               for c in cols)], body))
    body = [[esc(k), *(x for t, (mid, v) in enumerate(zip(m.members, m.returns, strict=True))
                       for x in (member_label(mid, cp, t, run), esc(short(v))))]
            for k, m in enumerate(cp.matches)]
    return (head + " One row per match: each team's member and its return.</p>"
            + raw_table(["match", *(f"{n} {w}" for n in names for w in ("member", "return"))],
                        body))


def references_table(run: Run, teams: Teams) -> str:
    if not teams.refs:
        return ("<p class='muted'>no play against references logged "
                "(games.reference_episodes: 0?)</p>")
    rows = []
    for i in sample_rows(len(run.metrics)):
        r = run.metrics[i]
        line = [esc(r.get("generation")), esc(fmt(r.get("env_steps")))]
        for team in teams.names:
            line.append(esc(champion(r, team)))
            for ref in teams.refs:
                v, bar = num(r.get(f"vs/{team}/{ref}")), num(r.get(f"vs/{team}/{ref}/ref"))
                cls = ("good" if v > bar else "bad" if v < bar else "") \
                    if math.isfinite(v) and math.isfinite(bar) else ""
                text = esc(short(v))
                line.append((f"<span class='{cls}'>{text}</span>" if cls else text)
                            + (f" (ref {esc(short(bar))})" if math.isfinite(bar) else ""))
        rows.append(line)
    shown = ("every generation" if len(rows) == len(run.metrics)
             else f"{len(rows)} of {len(run.metrics)} generations, evenly spaced, the last "
                  "included")
    return (f"<p>Each team's champion against each reference ({esc(shown)}): its own team's "
            "return, and in brackets the reference's own return in that seat against the same "
            "opponents. Green: the champion clears that bar; red: it does not.</p>"
            + raw_table(["generation", "env steps",
                         *(h for team in teams.names
                           for h in (f"{team} champion",
                                     *(f"{team} vs {ref}" for ref in teams.refs)))], rows))


def section(run: Run) -> str | None:
    """The Teams section's HTML, or None for a run of one team (the cooperative games)."""
    if not is_team_run(run):
        return None
    teams = read_teams(run)
    ratings = ratings_plot(run, teams)
    return (overview(run, teams)
            + "<h3>Fitness</h3>" + figure(fitness_plot(run, teams))
            + (figure(ratings) if ratings is not None else "")
            + "<h3>Cross-play in the last generation</h3>" + cross_play_html(run, teams)
            + "<h3>Champions against fixed references</h3>" + references_table(run, teams)
            + (figure(references_plot(run, teams)) if teams.refs else ""))
