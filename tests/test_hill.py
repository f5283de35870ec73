"""eval.champion: hill: a team's kept champion, replaced only by a generation champion that does
at least as well against the same bench."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import yaml

from evohpo import checkpoint
from evohpo import config as C
from evohpo.algos import Algorithm
from evohpo.cli import main
from evohpo.envs import spec_for
from evohpo.games import hill
from evohpo.loop.trainer import Trainer
from evohpo.runtime.evaluate import Teams, playing_teams
from tests.test_competitive import TEAMS, run, tag_cfg
from tests.test_trainer import read_jsonl, strip_time

HILL = {"eval": {"champion": "hill", "champion_episodes": 4}}


def actors_equal(a: Algorithm, b: Algorithm, agents: tuple[str, ...]) -> bool:
    return all(torch.equal(x, y) for ag in agents
               for x, y in zip(a.actors[ag].state_dict().values(),
                               b.actors[ag].state_dict().values(), strict=True))


def hill_of(cfg: C.Config) -> tuple[hill.Hill, Teams, Trainer]:
    """A Hill on ``cfg``'s teams and a trainer holding members to offer it."""
    spec = spec_for(cfg.env)
    teams = playing_teams(cfg, spec)
    assert teams is not None
    return hill.Hill(cfg, spec, teams), teams, Trainer(cfg)


def test_a_newcomer_replaces_the_kept_champion_only_when_at_least_as_good_on_the_bench(
        monkeypatch: pytest.MonkeyPatch) -> None:
    keeper, teams, t = hill_of(tag_cfg(**HILL))
    candidates = [m.algo for m in t.members[:3]]
    # each generation's champions' bench score per team; the kept one scores its own generation's
    strength = {0: (5.0, 5.0), 1: (4.0, 6.0), 2: (5.0, 6.0)}
    now = {"gen": 0}
    benches: list[list[Any]] = []

    def fake(policy: Any, team: int, others: list[Any], *_: Any) -> float:
        benches.append(others)
        g = now["gen"] if policy is candidates[now["gen"]] else keeper.records[team]["generation"]
        return strength[g][team] + (0.0 if others[0] is keeper.heuristic else 100.0)

    monkeypatch.setattr(hill, "seat_return", fake)
    records = {team: {"id": 10 + i} for i, (team, _) in enumerate(teams)}
    kept_gens = []
    for g, cand in enumerate(candidates):
        now["gen"] = g
        keeper.offer(cand, {k: {**v, "id": v["id"] + 100 * g} for k, v in records.items()}, g)
        kept_gens.append(tuple(r["generation"] for r in keeper.records))
        if g == 1:  # the adversaries keep generation 0's, the good agents take generation 1's
            combined = keeper.algo()
            assert actors_equal(combined, candidates[0], TEAMS["adversaries"])
            assert actors_equal(combined, candidates[1], TEAMS["good"])
            assert not actors_equal(combined, candidates[1], TEAMS["adversaries"])
    # a tie goes to the newcomer
    assert kept_gens == [(0, 0), (0, 1), (2, 2)]
    assert keeper.record()["teams"]["good"] == {"id": 211, "generation": 2}
    # the bench: the generation's champions, then the heuristic, in every other seat
    assert benches and all(b == [b[0]] * len(teams) for b in benches)
    assert {id(b[0]) for b in benches} == {id(candidates[1]), id(candidates[2]),
                                           id(keeper.heuristic)}
    m = keeper.metrics()
    assert m["team/adversaries/kept_generation"] == 2 and m["team/good/kept"] == 211
    assert m["team/good/hill/new"] == m["team/good/hill/kept"] == 6.0 + 50.0
    t.close()
    keeper.close()


def test_the_bench_scores_are_team_returns_on_the_same_episodes() -> None:
    """Unpatched: a policy against itself scores what the bench's match gives it, so the kept
    champion and a newcomer that is the same network tie (and the newcomer is kept)."""
    keeper, teams, t = hill_of(tag_cfg(**HILL))
    a = t.members[0].algo
    keeper.offer(a, {team: {"id": 1} for team, _ in teams}, 0)
    keeper.offer(a.clone(0), {team: {"id": 2} for team, _ in teams}, 1)
    assert [r["generation"] for r in keeper.records] == [1, 1]
    m = keeper.metrics()
    for team, _ in teams:
        assert m[f"team/{team}/hill/new"] == m[f"team/{team}/hill/kept"]
        assert np.isfinite(m[f"team/{team}/hill/new"])
    t.close()
    keeper.close()


def test_hill_changes_what_a_run_hands_over_and_nothing_else(tmp_path: Path) -> None:
    over = {"steps": 112}
    run(tag_cfg(**over), tmp_path / "current")
    _, t = run(tag_cfg(**over, **HILL), tmp_path / "hill")
    for name in ("lineage.jsonl", "league.jsonl"):
        assert read_jsonl(tmp_path / "hill" / name) == read_jsonl(tmp_path / "current" / name)
    cur, hil = (strip_time(read_jsonl(tmp_path / d / "metrics.jsonl"))
                for d in ("current", "hill"))
    kept_keys = ("/kept", "/kept_generation", "/hill/new", "/hill/kept")
    for c, h in zip(cur, hil, strict=True):
        extra = {k for k in h if k not in c}
        assert extra and all(k.endswith(kept_keys) for k in extra)
        # the references table plays the kept champions: the same at generation 0
        assert {k: v for k, v in h.items() if k in c and not k.startswith("vs/")} == {
            k: v for k, v in c.items() if not k.startswith("vs/")}
    assert hil[0] == {**cur[0], **{k: hil[0][k] for k in hil[0] if k not in cur[0]}}
    # best.pt holds each team's kept champion, with the generation it was kept
    last = hil[-1]
    meta, tensors = checkpoint.load(tmp_path / "hill" / "checkpoints" / "best.pt")
    keeper = t.league.hill if t.league else None
    assert keeper is not None
    for team, agents in TEAMS.items():
        rec = meta["member"]["teams"][team]
        assert rec["generation"] == last[f"team/{team}/kept_generation"] <= last["generation"]
        assert rec["id"] == last[f"team/{team}/kept"]
        k = keeper.kept[list(TEAMS).index(team)]
        for a in agents:
            for name, v in k.actors[a].state_dict().items():
                assert torch.equal(tensors["algo"]["actors"][a][name], v)


def test_train_names_each_teams_kept_champion(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "tag.yaml").write_text(yaml.safe_dump(C.to_dict(tag_cfg(**HILL))))
    assert main(["train", "--config", str(tmp_path / "tag.yaml"), "--quiet", "--run-dir",
                 str(tmp_path / "run")]) == 0
    done = capsys.readouterr().out.splitlines()[-1]
    meta, _ = checkpoint.load(tmp_path / "run" / "checkpoints" / "best.pt")
    for team in TEAMS:
        rec = meta["member"]["teams"][team]
        assert f"kept: member {rec['id']} of generation {rec['generation']})" in done
