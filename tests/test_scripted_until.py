"""population.scripted_teams_until: the scripted heuristic meets the named teams only for a
run's first env steps, then every team in turn."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from evohpo import config as C
from evohpo.cli import main
from evohpo.errors import ConfigError
from evohpo.games import league as versus
from evohpo.loop.trainer import Trainer
from tests.test_competitive import SCRIPTED, tag_cfg
from tests.test_trainer import read_jsonl, strip_time

# the heuristic drawn in every slot and window, against the predators (team 0) only
ADV: dict[str, Any] = {**SCRIPTED, "population": {"scripted_opponents": 1.0,
                                                  "scripted_teams": ["adversaries"]}}


def until(at: int | None) -> C.Config:
    return tag_cfg(**{**ADV, "population": {**ADV["population"], "scripted_teams_until": at}})


def test_the_named_teams_meet_the_heuristic_until_the_env_steps_then_every_team() -> None:
    half, every = Trainer(until(500)), Trainer(tag_cfg(**SCRIPTED))
    assert half.league is not None and every.league is not None
    for g in range(12):
        for env_steps in (0, 499):  # windows that start before 500 env steps
            assert [u for u, _ in half.league.draws(g, env_steps)] == [0, 0]
        for env_steps in (500, 999):  # from 500: as with scripted_teams null
            drawn = half.league.draws(g, env_steps)
            assert drawn == every.league.draws(g, env_steps)
            assert [u for u, _ in drawn] == [g % 2, (g + 1) % 2]
            assert all(e == versus.SCRIPTED for _, e in drawn)
    # the default, null: the named teams for the whole run
    whole = Trainer(until(None))
    assert whole.league is not None
    assert all(u == 0 for g in range(12) for u, _ in whole.league.draws(g, 999))
    for t in (half, every, whole):
        t.close()


def test_a_run_switches_at_the_first_window_that_starts_there_and_resumes_exactly(
        tmp_path: Path) -> None:
    # windows of 32 env steps here: the one of 32 to 64 starts before 40 and meets the
    # heuristic as the predators only, even resumed from 48, in its middle
    (tmp_path / "until.yaml").write_text(yaml.safe_dump(C.to_dict(until(40))))
    base = ["train", "--quiet", "--config", str(tmp_path / "until.yaml")]
    assert main([*base, "--steps", "128", "--run-dir", str(tmp_path / "full")]) == 0
    assert main([*base, "--steps", "48", "--run-dir", str(tmp_path / "part")]) == 0
    assert main(["train", "--resume", str(tmp_path / "part"), "--steps", "128", "--quiet"]) == 0
    for name in ("lineage.jsonl", "league.jsonl"):
        assert read_jsonl(tmp_path / "part" / name) == read_jsonl(tmp_path / "full" / name)
    metrics = read_jsonl(tmp_path / "full" / "metrics.jsonl")
    assert strip_time(read_jsonl(tmp_path / "part" / "metrics.jsonl")) == strip_time(metrics)
    # league.jsonl names the teams that met the heuristic in each window
    league = read_jsonl(tmp_path / "full" / "league.jsonl")
    assert [sorted({u for u, _ in row["past_opponents"]}) for row in league] == [
        [0], [0], [0, 1], [0, 1]]
    assert [m["generation"] for m in metrics] == [0, 1, 2, 3]


def test_the_switch_is_the_run_resumed_with_scripted_teams_null(tmp_path: Path) -> None:
    """Trained to the switch and resumed there with scripted_teams null, a run trains as the
    run with scripted_teams_until: the same members, mutations and metrics."""
    (tmp_path / "until.yaml").write_text(yaml.safe_dump(C.to_dict(until(64))))
    assert main(["train", "--quiet", "--config", str(tmp_path / "until.yaml"), "--steps", "128",
                 "--run-dir", str(tmp_path / "full")]) == 0
    (tmp_path / "adv.yaml").write_text(yaml.safe_dump(C.to_dict(tag_cfg(**ADV))))
    part = tmp_path / "part"
    assert main(["train", "--quiet", "--config", str(tmp_path / "adv.yaml"), "--steps", "64",
                 "--run-dir", str(part)]) == 0
    cfg = yaml.safe_load((part / "config.yaml").read_text())
    cfg["population"]["scripted_teams"] = None
    (part / "config.yaml").write_text(yaml.safe_dump(cfg))
    assert main(["train", "--resume", str(part), "--steps", "128", "--quiet"]) == 0
    assert read_jsonl(part / "lineage.jsonl") == read_jsonl(tmp_path / "full" / "lineage.jsonl")
    assert (strip_time(read_jsonl(part / "metrics.jsonl"))
            == strip_time(read_jsonl(tmp_path / "full" / "metrics.jsonl")))


@pytest.mark.parametrize(("over", "says"), [
    ({**SCRIPTED, "population": {"scripted_opponents": 1.0, "scripted_teams_until": 500}},
     "name the teams there"),
    ({"population": {"teams": "joint", "scripted_teams_until": 500}}, "several teams"),
    ({**ADV, "population": {**ADV["population"], "scripted_teams_until": -5}}, "-5"),
])
def test_scripted_teams_until_config_errors(over: dict[str, Any], says: str) -> None:
    with pytest.raises(ConfigError) as ei:
        Trainer(tag_cfg(**over)).close()
    assert "population.scripted_teams_until" in str(ei.value) and says in str(ei.value)
