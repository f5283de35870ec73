"""Games of several teams: a population per team, cross-play fitness, references, resume."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import yaml

from evohpo import api, checkpoint
from evohpo import config as C
from evohpo.cli import main
from evohpo.errors import ConfigError
from evohpo.games import league as versus
from evohpo.logs.loggers import JsonlLogger, summary_line
from evohpo.loop.trainer import Trainer
from evohpo.runtime import local
from evohpo.runtime.evaluate import Score
from tests.test_trainer import TINY, read_jsonl, strip_time

TAG = {"env": {"name": "simple_tag", "kwargs": {"continuous_actions": True, "max_cycles": 25}},
       "eval": {"episodes": 2}, "games": {"reference_episodes": 4}, "steps": 96}
TEAMS = {"adversaries": ("adversary_0", "adversary_1", "adversary_2"), "good": ("agent_0",)}


def tag_cfg(**over: Any) -> C.Config:
    return C.load([TINY, TAG, over])


def run(cfg: C.Config, d: Path) -> tuple[dict[str, Any], Trainer]:
    d.mkdir(parents=True, exist_ok=True)
    log = JsonlLogger(d)
    t = Trainer(cfg, log, d)
    try:
        summary = t.train()
    finally:
        t.close()
        log.close()
    return summary, t


def test_each_team_evolves_its_own_members(tmp_path: Path) -> None:
    _, t = run(tag_cfg(mutation={"none": 0, "hyperparameters": 1}), tmp_path)
    lineage = read_jsonl(tmp_path / "lineage.jsonl")
    births = [r for r in lineage if r["kind"] == "birth"]
    assert [(r["member_id"], r["team"]) for r in births] == [
        (0, "adversaries"), (1, "adversaries"), (2, "good"), (3, "good")]
    team_of = {r["member_id"]: r["team"] for r in births}
    for r in lineage:
        team_of.setdefault(r["member_id"], r["team"])
        assert r["team"] == team_of[r["member_id"]]
        if r["parent_id"] is not None:  # a child is always a clone of its own team's member
            assert team_of[r["parent_id"]] == r["team"]
    children = [r for r in lineage if r["kind"] == "hyperparameters"]
    assert {r["team"] for r in children} == {"adversaries", "good"}
    # the population stays two members per team, team after team
    assert [m.team for m in t.members] == ["adversaries", "adversaries", "good", "good"]
    metrics = read_jsonl(tmp_path / "metrics.jsonl")
    last = metrics[-1]
    for team in TEAMS:
        assert last[f"team/{team}/champion"] in {m.id for m in t.members if m.team == team}
        for ref in ("random", "heuristic", "first"):
            key = f"vs/{team}/{ref}"
            assert np.isfinite(last[key]) and np.isfinite(last[key + "/ref"])
    assert last["eval/best_fitness"] == last["team/adversaries/best_fitness"]
    # the console's line per generation names every team's champion, not the first team's alone
    line = summary_line(last)
    for team in TEAMS:
        assert (f"{team} best {last[f'team/{team}/best_fitness']:.2f} (member "
                f"{last[f'team/{team}/champion']}) mean "
                f"{last[f'team/{team}/mean_fitness']:.2f}") in line
    assert "best member" not in line
    # round robin: every pair of the two teams met in every generation
    league = read_jsonl(tmp_path / "league.jsonl")
    assert len(league) == len(metrics)
    for row, m in zip(league, metrics, strict=True):
        assert row["generation"] == m["generation"] and len(row["matches"]) == 4
        assert len({tuple(x) for x in row["matches"]}) == 4


def test_best_pt_holds_every_teams_champion(tmp_path: Path) -> None:
    _, t = run(tag_cfg(), tmp_path)
    meta, tensors = checkpoint.load(tmp_path / "checkpoints" / "best.pt")
    rec = meta["member"]
    assert set(rec["teams"]) == set(TEAMS)
    by_id = {m.id: m for m in t.members}
    for team, agents in TEAMS.items():
        champ = by_id[rec["teams"][team]["id"]]
        for a in agents:
            for k, v in champ.algo.actors[a].state_dict().items():
                assert torch.equal(tensors["algo"]["actors"][a][k], v)


def league_of(cfg: C.Config) -> tuple[versus.League, Trainer]:
    """A league on ``cfg``'s teams and a trainer holding the members it scores."""
    t = Trainer(cfg)
    assert isinstance(t.populations, versus.League)
    return t.populations, t


def test_fitness_comes_only_from_the_members_own_team(monkeypatch: pytest.MonkeyPatch) -> None:
    league, t = league_of(tag_cfg())
    members = t.members
    bonus = {"value": 0.0}

    def fake_returns(lineup: Any, pool: Any, seed: int) -> dict[str, np.ndarray]:
        # each team's agents earn the id of the member driving them; the other team's agents
        # earn whatever ``bonus`` says on top
        out = {}
        for policy, agents in lineup:
            m = next(m for m in members if m.algo is policy)
            for a in agents:
                out[a] = np.full(2, float(m.id)) + (bonus["value"] if a == "agent_0" else 0)
        return out

    monkeypatch.setattr(local, "episode_returns", fake_returns)  # the runtime plays matches
    first = league.evaluate(members, seed=1)
    bonus["value"] = 1000.0  # only the good team's returns change
    second = league.evaluate(members, seed=1)
    for m, a, b in zip(members, first, second, strict=True):
        if m.team == "adversaries":  # three adversaries, each earning the member's id
            assert a.fitness == b.fitness == 3 * m.id
        else:
            assert a.fitness == m.id and b.fitness == m.id + 1000
    t.close()
    league.close()


def test_elo_fitness_is_the_rating(tmp_path: Path) -> None:
    _, t = run(tag_cfg(games={"fitness": "elo"}), tmp_path)
    last = read_jsonl(tmp_path / "metrics.jsonl")[-1]
    ratings = [last[f"member/{m.id}/rating"] for m in t.members if f"member/{m.id}/rating" in last]
    assert ratings and any(r != 1000.0 for r in ratings)
    assert last["team/adversaries/best_fitness"] == max(
        last[f"member/{m.id}/rating"] for m in t.members
        if m.team == "adversaries" and f"member/{m.id}/rating" in last)


# the scripted heuristic as a training opponent, and slots without it; the predators' training
# rewards shaped
MIXED = {"env": {"num_envs": 4, "shaping": {"adversaries": 1.0}},
         "games": {"scripted_opponents": 0.5}}
SCRIPTED = {"env": {"num_envs": 4}, "games": {"scripted_opponents": 1.0}}
# each agent's last three observations, the heuristic in half the envs reading the newest
FRAMED = {"env": {"num_envs": 4, "frames": 3}, "games": {"scripted_opponents": 0.5}}


@pytest.mark.parametrize(("first", "over"), [
    (64, {}), (80, {}),  # at a window end, and mid-window
    (80, MIXED),  # the heuristic as an opponent, shaped rewards
    (80, FRAMED)])
def test_a_team_run_resumes_exactly(tmp_path: Path, first: int, over: dict[str, Any]) -> None:
    base = ["train", "--config", str(tmp_path / "tag.yaml"), "--quiet"]
    (tmp_path / "tag.yaml").write_text(yaml.safe_dump(C.to_dict(tag_cfg(**over))))
    assert main([*base, "--steps", "112", "--run-dir", str(tmp_path / "full")]) == 0
    assert main([*base, "--steps", str(first), "--run-dir", str(tmp_path / "part")]) == 0
    assert main(["train", "--resume", str(tmp_path / "part"), "--steps", "112", "--quiet"]) == 0
    for name in ("lineage.jsonl", "league.jsonl"):
        assert read_jsonl(tmp_path / "part" / name) == read_jsonl(tmp_path / "full" / name)
    assert (strip_time(read_jsonl(tmp_path / "part" / "metrics.jsonl"))
            == strip_time(read_jsonl(tmp_path / "full" / "metrics.jsonl")))


def test_an_older_run_resumed_measures_its_reference_bars_on_the_new_episodes(
        tmp_path: Path) -> None:
    base = ["train", "--config", str(tmp_path / "tag.yaml"), "--quiet"]
    (tmp_path / "tag.yaml").write_text(yaml.safe_dump(C.to_dict(tag_cfg())))
    assert main([*base, "--steps", "112", "--run-dir", str(tmp_path / "full")]) == 0
    assert main([*base, "--steps", "64", "--run-dir", str(tmp_path / "part")]) == 0
    latest = tmp_path / "part" / "checkpoints" / "latest.pt"
    meta, tensors = checkpoint.load(latest)
    league = meta["league"]
    del league["seeding"]  # bars measured by an older evohpo, on other episodes
    league["baseline"] = {k: 1e6 for k in league["baseline"]}
    checkpoint.save(latest, meta, tensors)
    assert main(["train", "--resume", str(tmp_path / "part"), "--steps", "112", "--quiet"]) == 0
    bars = [{k: v for k, v in m.items() if k.endswith("/ref")}
            for m in read_jsonl(tmp_path / "part" / "metrics.jsonl")[-3:]]
    assert bars[-1] and bars == [{k: v for k, v in m.items() if k.endswith("/ref")}
                                 for m in read_jsonl(tmp_path / "full" / "metrics.jsonl")[-3:]]


def test_joint_population_drives_every_agent_as_before(tmp_path: Path) -> None:
    run(tag_cfg(games={"teams": "joint"}), tmp_path)
    births = [r for r in read_jsonl(tmp_path / "lineage.jsonl") if r["kind"] == "birth"]
    assert len(births) == 2 and all("team" not in r for r in births)
    assert not (tmp_path / "league.jsonl").exists()
    assert not any(k.startswith("team/") for k in read_jsonl(tmp_path / "metrics.jsonl")[-1])


def test_eval_of_a_team_run_plays_the_episodes_of_best_pts_matches(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``evohpo eval RUN`` of a game of teams plays best.pt's champions on the episodes their
    cross-play fitness was measured on (best.pt's seed and episodes): each team's return is
    the one their match in that generation gave (league.jsonl)."""
    api.train(tag_cfg(eval={"episodes": 3}), run_dir=tmp_path, quiet=True)
    rec = checkpoint.load(tmp_path / "checkpoints" / "best.pt")[0]["member"]
    champs = [rec["teams"][team]["id"] for team in TEAMS]
    last = read_jsonl(tmp_path / "league.jsonl")[-1]
    match = last["team_returns"][last["matches"].index(champs)]
    capsys.readouterr()
    assert main(["eval", str(tmp_path)]) == 0
    head, *rows = capsys.readouterr().out.splitlines()
    said = {r.split()[1]: float(r.split("return")[1].split("+-")[0]) for r in rows
            if r.split()[0] == "team"}
    assert said == pytest.approx(dict(zip(TEAMS, match, strict=True)), abs=1e-3), head
    assert rec["episodes"] == 3 and isinstance(rec["eval_seed"], int)
    assert f": 3 episodes, seed {rec['eval_seed']} (the episodes of best.pt's matches)" in head


def test_eval_against_prints_both_teams(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    api.train(tag_cfg(), run_dir=tmp_path / "a", quiet=True)
    api.train(tag_cfg(seed=1), run_dir=tmp_path / "b", quiet=True)
    capsys.readouterr()
    meta, _ = checkpoint.load(tmp_path / "a" / "checkpoints" / "latest.pt")
    good = next(m["id"] for m in meta["members"] if m["team"] == "good")
    for opponent in ("random", "heuristic", str(good), str(tmp_path / "b")):
        assert main(["eval", str(tmp_path / "a"), "--against", opponent, "--episodes", "3"]) == 0
        out = capsys.readouterr().out
        assert "adversaries (member)" in out and "good (opponent)" in out
    assert main(["eval", str(tmp_path / "a"), "--against", "random", "--team", "good",
                 "--episodes", "3"]) == 0
    assert "good (member)" in capsys.readouterr().out
    assert main(["eval", str(tmp_path / "a"), "--against", "nobody"]) == 2
    assert "--against 'nobody'" in capsys.readouterr().err
    # an opponent member of the adversaries: the run's champions play the good agents' seat
    advs = [m["id"] for m in meta["members"] if m["team"] == "adversaries"]
    assert main(["eval", str(tmp_path / "a"), "--against", str(advs[0]), "--episodes", "3"]) == 0
    out = capsys.readouterr().out
    assert "good (member)" in out and "adversaries (opponent)" in out
    # two members of one team cannot meet: the opponent member has no other team's policy
    assert main(["eval", str(tmp_path / "a"), "--member", str(advs[0]), "--against",
                 str(advs[1])]) == 2
    assert f"--against {advs[1]}: member {advs[1]} trained team 'adversaries'" in \
        capsys.readouterr().err
    # nor can a member play the team it did not train
    assert main(["eval", str(tmp_path / "a"), "--member", str(advs[0]), "--team", "good",
                 "--against", "random"]) == 2
    assert f"--team good: member {advs[0]} trained team 'adversaries' only" in \
        capsys.readouterr().err
    assert main(["eval", str(tmp_path / "a"), "--against", "999999"]) == 2
    assert "--against 999999: no such member" in capsys.readouterr().err
    assert main(["eval", str(tmp_path / "a"), "--against", "random", "--team", "x"]) == 2
    assert "--team 'x'" in capsys.readouterr().err


def test_eval_against_heuristic_plays_each_champion_against_the_script(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    api.train(tag_cfg(), run_dir=tmp_path, quiet=True)
    capsys.readouterr()
    base = ["eval", str(tmp_path), "--against", "heuristic", "--episodes", "3"]
    assert main(base) == 0
    out = capsys.readouterr().out.splitlines()
    heads = [line for line in out if not line.startswith(" ")]
    assert [h.split(" plays ")[1].split(";")[0] for h in heads] == ["adversaries", "good"]
    assert all("heuristic plays" in h for h in heads)
    # each team's game is the one --team plays: the same episodes, the script in the other seats
    for team, block in zip(("adversaries", "good"), (out[:3], out[3:]), strict=True):
        assert main([*base, "--team", team]) == 0
        assert capsys.readouterr().out.splitlines() == block
        assert f"{team} (member)" in block[1] + block[2]


def test_against_needs_a_game_of_several_teams(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    api.train(C.load([TINY, {"steps": 32}]), run_dir=tmp_path, quiet=True, overwrite=True)
    assert main(["eval", str(tmp_path), "--against", "random"]) == 2
    assert "one team" in capsys.readouterr().err


def test_league_scores_diverged_members_worst() -> None:
    cfg = tag_cfg()
    t = Trainer(cfg)
    assert t.populations is not None
    with torch.no_grad():
        t.members[1].algo.actors["adversary_0"].layers[0].weight[0, 0] = float("nan")
    scores = t.populations.evaluate(t.members, seed=3)
    assert scores[1] == Score.diverged(t.spec.agents) or scores[1].fitness == -np.inf
    assert t.members[1].diverged and all(np.isfinite(s.fitness) for i, s in enumerate(scores)
                                         if i != 1)
    t.close()


@pytest.mark.parametrize("facing", [None])
def test_scripted_heuristic_plays_the_second_half_of_each_slot(facing: list[str] | None) -> None:
    from evohpo.envs.heuristics import Scripted, heuristic_policy

    t = Trainer(tag_cfg(**{**SCRIPTED, "games": {"scripted_opponents": 1.0}}))
    league, rt = t.populations, t.runtime
    assert league is not None
    heuristic = heuristic_policy(t.spec, "simple_tag", t.cfg.env.kwargs)
    for m in t.members:
        m.algo.set_hyperparams(expl_noise=0.0)
    for generation in (0, 1):  # from the first window: it needs nothing kept
        opponents = league.opponents(generation)
        # the team whose member plays the heuristic: every team in turn, or the one named
        turn = [(j + generation) % 2 for j in range(2)] if facing is None or len(facing) == 2 \
            else [["adversaries", "good"].index(facing[0])] * 2
        assert opponents is not None and [u for u, _ in opponents] == turn
        assert [u for u, _ in league.drawn(generation)] == turn  # as league.jsonl records
        assert all(isinstance(p, Scripted) for _, p in opponents)
        slots = league.slots(generation)
        rt.start()
        rt.place(t.members, slots, opponents)
        obs = rt.obs
        assert obs is not None
        k = rt.k
        for noise in (True, False):  # exploring, and the noise-free pass for next actions
            env_act, stored = rt.act(obs, noise=noise)
            for j, (live, _) in enumerate(opponents):
                for team, (_, agents) in enumerate(league.teams):
                    member = t.members[slots[j][team]].algo
                    for half in (slice(j * k, j * k + k // 2), slice(j * k + k // 2, (j + 1) * k)):
                        second = half.start > j * k
                        rows = {a: obs[a][half] for a in t.spec.agents}
                        want, keep = (heuristic.act(rows) if second and team != live
                                      else member.act(rows, None))
                        for a in agents:
                            np.testing.assert_allclose(env_act[a][half], want[a], rtol=1e-5)
                            np.testing.assert_allclose(stored[a][half], keep[a], rtol=1e-5)
    t.close()


@pytest.mark.parametrize(("over", "says"), [
    ({"games": {"scripted_opponents": 1.0}}, "must be even"),
    ({**SCRIPTED, "games": {"scripted_opponents": 1.0, "teams": "joint"}}, "several teams"),
    ({**SCRIPTED, "env": {"name": "simple_world_comm", "num_envs": 4}}, "simple_world_comm"),
    ({**SCRIPTED, "games": {"scripted_opponents": 1.5}}, "1.5"),
])
def test_scripted_opponents_config_errors(over: dict[str, Any], says: str) -> None:
    with pytest.raises(ConfigError) as ei:
        Trainer(tag_cfg(**over)).close()
    assert "games.scripted_opponents" in str(ei.value) and says in str(ei.value)




def test_scripted_opponents_drawn_at_their_rate_reproducibly() -> None:
    t = Trainer(tag_cfg(**{**MIXED, "games": {"scripted_opponents": 0.25}}))
    league = t.populations
    assert league is not None
    drawn = [league.draws(g) for g in range(400)]
    assert drawn == [league.draws(g) for g in range(400)]
    picks = [e for d in drawn for _, e in d] + [versus.LIVE] * 2 * sum(not d for d in drawn)
    share = np.mean([e == versus.SCRIPTED for e in picks])
    assert len(picks) == 800 and abs(share - 0.25) < 0.05  # 4 standard errors
    assert set(picks) == {versus.SCRIPTED, versus.LIVE}
    none = [g for g, d in enumerate(drawn) if not d]
    assert none and all(league.opponents(g) is None for g in none)
    # the team that meets the heuristic: every team in turn, by slot and window
    assert all(u == (j + g) % 2 for g, d in enumerate(drawn) for j, (u, _) in enumerate(d))
    t.close()
