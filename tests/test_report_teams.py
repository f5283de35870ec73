"""The report of a game of several teams: the Teams section on hand-made files with known
answers (the cross-play matrix, the champions, the references table's generations, every
team's lines in the top fitness figure), more than two teams, no such section on a cooperative
run, and the whole path on a real tiny simple_tag run."""

from __future__ import annotations

import html
import itertools
import json
import re
from pathlib import Path
from typing import Any

import pytest

from evohpo import config as C
from evohpo.cli import main
from evohpo.report import build_report
from evohpo.report.data import load_run
from evohpo.report.teams import cross_play, read_teams, sample_rows
from tests.test_report import assert_self_contained, coloured_pixels, figures, write_run
from tests.test_trainer import TINY, read_jsonl

TEAMS = ("predators", "prey")
TAG_ARGS = ["--algo", "matd3", "--env", "simple_tag", "--quiet", "--steps", "96",
            "--set", "env.pool=sync", "--set", "env.num_envs=4", "--set", "population.size=2",
            "--set", "evolution.evo_steps=16", "--set", "evolution.learning_delay=0",
            "--set", "algo.batch_size=8", "--set", "algo.learn_step=4", "--set", "algo.hidden=[16]",
            "--set", "eval.episodes=1", "--set", "games.reference_episodes=1",
            "--set", "games.fitness=elo", "--set", "buffer.capacity=1000",
            "--set", "env.kwargs.max_cycles=8", "--set", "mutation.hyperparameters=1"]


def write_team_run(path: Path, generations: int = 3, elo: bool = False,
                   teams: tuple[str, ...] = TEAMS) -> Path:
    """Two members per team: ids 0, 1 for the first team, 2, 3 for the second (4, 5 for a third).
    Member i's fitness in generation g is 10 * i + g; each team's fittest is its champion. From
    generation 1 the first team's member 0 is replaced by 6, a clone of 1. The matches' returns
    are known numbers; in the last generation, the last match had a diverged member (null)."""
    path.mkdir(parents=True)
    cfg = {"env": {"name": "simple_tag"}, "games": {"fitness": "elo" if elo else "return"}}
    (path / "config.yaml").write_text(C.dump(C.load([TINY, cfg])))
    rows, league = [], []
    for g in range(generations):
        ids = [[6 if g else 0, 1], *([2 * t, 2 * t + 1] for t in range(1, len(teams)))]
        row: dict[str, Any] = {"env_steps": 100 * (g + 1), "generation": g,
                               "time/elapsed_s": 1.0 + g, "eval/best_member": 1,
                               "eval/best_fitness": 10.0 + g, "eval/mean_fitness": 5.0 + g}
        for team, members in zip(teams, ids, strict=True):
            for i in members:
                row[f"member/{i}/fitness"] = 10.0 * i + g
                if elo:
                    row[f"member/{i}/rating"] = 1000.0 + 10 * i + g
            row[f"team/{team}/best_fitness"] = 10.0 * max(members) + g
            row[f"team/{team}/mean_fitness"] = 10.0 * (members[0] + members[1]) / 2 + g
            row[f"team/{team}/champion"] = max(members)
            for ref in ("random", "heuristic"):
                row[f"vs/{team}/{ref}"] = -1.0 * g - (10 if ref == "random" else 20)
                row[f"vs/{team}/{ref}/ref"] = -30.1 if ref == "random" else -5.0
        rows.append(row)
        if len(teams) == 2:
            matches = [[a, b] for a in ids[0] for b in ids[1]]
            returns: list[list[float | None]] = [[10.0 * k + g, -10.0 * k - g]
                                                 for k in range(len(matches))]
        else:
            matches = [[ids[0][k], ids[1][k], ids[2][k]] for k in range(2)]
            returns = [[1.0 + k, 2.0 + k, 3.0 + k] for k in range(2)]
        if g == generations - 1:
            returns[-1] = [None] * len(teams)  # a diverged member played
        league.append({"generation": g, "matches": matches, "team_returns": returns})
    lineage = [{"generation": 0, "member_id": i, "parent_id": None, "kind": "birth",
                "team": teams[i // 2]} for i in range(2 * len(teams))]
    lineage += [{"generation": 0, "member_id": 1, "parent_id": 1, "kind": "elite",
                 "team": teams[0]},
                {"generation": 0, "member_id": 6, "parent_id": 1, "kind": "none",
                 "team": teams[0]}]
    for name, lines in (("metrics", rows), ("league", league), ("lineage", lineage)):
        (path / f"{name}.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def teams_section(page: str) -> str:
    start = page.index("<section id='teams'>")
    return page[start:page.index("</section>", start)]


def table_after(part: str, heading: str) -> list[list[str]]:
    """The cells (text only) of the first table after ``heading``, row by row."""
    t = re.search(r"<table>(.*?)</table>", part[part.index(heading):], re.S)
    assert t is not None
    return [[html.unescape(re.sub(r"<[^>]+>", "", c)) for c in
             re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", tr, re.S)]
            for tr in re.findall(r"<tr>(.*?)</tr>", t.group(1), re.S)]


def test_cross_play_matrix_puts_each_match_in_its_cell(tmp_path: Path) -> None:
    run = load_run(write_team_run(tmp_path / "r"))
    teams = read_teams(run)
    assert teams.names == list(TEAMS) and teams.refs == ["random", "heuristic"]
    assert {k: teams.member_team[k] for k in ("0", "1", "2", "3", "6")} == {
        "0": "predators", "1": "predators", "2": "prey", "3": "prey", "6": "predators"}
    cp = cross_play(run, teams)
    assert cp is not None and cp.generation == 2 and cp.champions == ["6", "3"]
    page = build_report([run.path]).read_text()
    assert_self_contained(page)
    assert "<a href='#teams'>Teams</a>" in page
    # right after Fitness, before the rest
    assert page.index("<section id='fitness'>") < page.index("<section id='teams'>") \
        < page.index("<section id='hyperparameters'>")
    sec = teams_section(page)
    # rows: the predators (6 replaced 0), columns: the prey; match k of g=2: (10k + 2, -10k - 2)
    assert table_after(sec, "Cross-play") == [
        ["predators \\ prey", "member 2", "member 3 ★"],
        ["member 6 ★ (fitness 62)", "2.0 / -2.0", "12.0 / -12.0"],
        ["member 1 (fitness 12)", "22.0 / -22.0", "n/a / n/a"]]
    # the champions' match in bold, and nothing else but the two row labels
    assert "<b>12.0 / -12.0</b>" in sec and sec.count("<b>") == 1 + 2
    assert "predators: member 6, prey: member 3" in html.unescape(sec)
    overview = table_after(sec, "Each team evolves")
    assert overview[1:] == [["predators", "6", "62", "37", "2"], ["prey", "3", "32", "27", "2"]]
    figs = figures(sec)
    assert len(figs) == 2  # fitness per team, references; no ratings logged
    for points, img in figs:
        assert points > 0 and coloured_pixels(img) > 50


def fitness_lines(run_dir: Path) -> list[dict[str, list[float]]]:
    """The lines of the report's top fitness figure, by label, on each of its two axes."""
    from evohpo.report.plots import fitness_figure

    return [{str(ln.get_label()): [float(y) for y in ln.get_ydata()] for ln in ax.lines}
            for ax in fitness_figure(load_run(run_dir)).axes]


@pytest.mark.parametrize("teams", [TEAMS, ("a", "b", "c")])
def test_the_top_fitness_figure_draws_every_teams_best_and_mean(
        tmp_path: Path, teams: tuple[str, ...]) -> None:
    run = write_team_run(tmp_path / "r", teams=teams)
    rows = read_jsonl(run / "metrics.jsonl")
    want = {f"{t} {k}": [r[f"team/{t}/{k}_fitness"] for r in rows]
            for t in teams for k in ("mean", "best")}
    for lines in fitness_lines(run):  # env steps and wall time
        assert lines == want  # no first team's eval/* alone, no best ever (cross-play has none)


def test_references_table_every_generation_or_twenty(tmp_path: Path) -> None:
    assert sample_rows(0) == [] and sample_rows(5) == [0, 1, 2, 3, 4]
    assert sample_rows(20) == list(range(20))
    for n in (21, 57, 100, 1000):
        rows = sample_rows(n)
        assert len(rows) == 20 and rows[0] == 0 and rows[-1] == n - 1
        gaps = {b - a for a, b in itertools.pairwise(rows)}
        assert max(gaps) - min(gaps) <= 1  # evenly spaced
    sec = teams_section(build_report([write_team_run(tmp_path / "few", 3)]).read_text())
    refs = table_after(sec, "Champions against fixed references")
    assert refs[0] == ["generation", "env steps", "predators champion", "predators vs random",
                       "predators vs heuristic", "prey champion", "prey vs random",
                       "prey vs heuristic"]
    assert [r[0] for r in refs[1:]] == ["0", "1", "2"]
    assert refs[3][2:5] == ["6", "-12.0 (ref -30.1)", "-22.0 (ref -5.0)"]
    # better than the reference in its seat: green; worse: red
    assert "<span class='good'>-12.0</span> (ref -30.1)" in sec
    assert "<span class='bad'>-22.0</span> (ref -5.0)" in sec
    sec = teams_section(build_report([write_team_run(tmp_path / "many", 45)]).read_text())
    gens = [int(r[0]) for r in table_after(sec, "Champions against fixed references")[1:]]
    assert gens == sample_rows(45) and gens[-1] == 44
    assert "20 of 45 generations" in sec


def test_ratings_and_more_than_two_teams(tmp_path: Path) -> None:
    sec = teams_section(build_report([write_team_run(tmp_path / "elo", elo=True)]).read_text())
    assert "Elo rating" in sec
    figs = figures(sec)
    assert len(figs) == 3 and all(points > 0 for points, _ in figs)  # + every member's rating
    three = ("a", "b", "<c>")
    page = build_report([write_team_run(tmp_path / "three", teams=three)]).read_text()
    sec = teams_section(page)
    assert "<c>" not in sec and "&lt;c&gt;" in sec  # names are escaped
    rows = table_after(sec, "Cross-play")
    assert rows[0] == ["match", "a member", "a return", "b member", "b return", "<c> member",
                       "<c> return"]
    assert rows[1] == ["0", "member 6 ★ (fitness 62)", "1.0", "member 2 (fitness 22)", "2.0",
                       "member 4 (fitness 42)", "3.0"]
    assert rows[2] == ["1", "member 1 (fitness 12)", "n/a", "member 3 ★ (fitness 32)", "n/a",
                       "member 5 ★ (fitness 52)", "n/a"]


def test_a_cooperative_run_has_no_teams_section(tmp_path: Path) -> None:
    page = build_report([write_run(tmp_path / "coop")]).read_text()
    assert "<section id='teams'>" not in page and "#teams" not in page
    assert re.findall(r"<section id='([^']+)'>", page) == [
        "summary", "fitness", "hyperparameters", "architecture", "training", "lineage",
        "mutations", "best-config", "config", "system"]


def test_report_of_a_real_tiny_team_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "tag"
    assert main(["train", *TAG_ARGS, "--run-dir", str(run)]) == 0
    assert main(["report", str(run)]) == 0
    assert f"wrote {run / 'report.html'}" in capsys.readouterr().out
    page = (run / "report.html").read_text()
    assert_self_contained(page)
    sec = teams_section(page)
    last, league = read_jsonl(run / "metrics.jsonl")[-1], read_jsonl(run / "league.jsonl")[-1]
    assert league["generation"] == last["generation"]
    champs = [str(last[f"team/{t}/champion"]) for t in ("adversaries", "good")]
    matrix = table_after(sec, "Cross-play")
    assert len(matrix) == 3 and all(len(r) == 3 for r in matrix)  # 2 x 2 matches
    assert {r[0].split()[1] for r in matrix[1:]} == {str(m[0]) for m in league["matches"]}
    assert f"member {champs[1]} ★" in matrix[0] and any(
        r[0].startswith(f"member {champs[0]} ★") for r in matrix[1:])
    refs = table_after(sec, "Champions against fixed references")
    rows = read_jsonl(run / "metrics.jsonl")
    assert len(refs) == 1 + len(rows)
    assert refs[-1][2] == champs[0] and "(ref " in refs[-1][3]
    assert fitness_lines(run)[0] == {f"{t} {k}": [r[f"team/{t}/{k}_fitness"] for r in rows]
                                     for t in ("adversaries", "good") for k in ("mean", "best")}
    figs = figures(sec)
    assert len(figs) == 3  # fitness per team, ratings, references
    for points, img in figs:
        assert points > 0 and coloured_pixels(img) > 50


def test_summary_and_comparison_of_team_runs(tmp_path: Path) -> None:
    """Across runs of a game of teams, cross-play fitness is relative to whom each run met:
    the summary gives each team's champion, and a comparison uses the champions' returns
    against the fixed references, per team, paired by seed."""
    runs = []
    for mode, shift in (("joint", 0.0), ("teams", 4.0)):
        for seed in (0, 1):
            d = write_team_run(tmp_path / "sw" / f"{mode}-s{seed}")
            cfg = {"env": {"name": "simple_tag"}, "seed": seed,
                   "games": {"teams": "joint" if mode == "joint" else "auto"}}
            (d / "config.yaml").write_text(C.dump(C.load([TINY, cfg])))
            rows = read_jsonl(d / "metrics.jsonl")
            for row in rows:
                for k in [k for k in row if k.startswith("vs/") and not k.endswith("/ref")]:
                    row[k] += shift + seed + (1.0 if k.startswith("vs/prey") else 0.0)
            (d / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
            runs.append(d)
    page = build_report(runs).read_text()
    summary = page[page.index("<section id='r0-summary'>"):
                   page.index("<section id='r0-fitness'>")]
    assert "predators: champion, best / mean fitness" in summary
    assert "member 6, 62.000 / 37.000" in summary and "member 3, 32.000 / 27.000" in summary
    assert "per team (predators, prey)" in summary
    comp = page[page.index("<section id='comparison'>"):page.index("<section id='r0'>")]
    # the last generation: vs random -12 and vs heuristic -22, plus seed (+1 for the prey)
    assert "<td>predators vs random</td>" in comp and "<td>prey vs heuristic</td>" in comp
    assert "-11.50 ± 0.71 (n=2)" in comp and "-7.50 ± 0.71 (n=2)" in comp  # predators vs random
    assert "-20.50 ± 0.71 (n=2)" in comp and "-16.50 ± 0.71 (n=2)" in comp  # prey vs heuristic
    assert "+4.00 ± 0.00 (s.e., n=2); 95% CI [+4.00, +4.00]" in comp
    assert "kept member" not in comp and "<td>best fitness</td>" not in comp
    assert all(points > 0 for points, _ in figures(comp))
