"""Teams: derived for every mpe2 env, set by env.teams (names and glob patterns), every error."""

from __future__ import annotations

import dataclasses

import pytest

from evohpo import config as C
from evohpo.cli import main
from evohpo.envs import MPE2_ENVS, make_pool, probe, spec_for
from evohpo.envs.teams import derive_teams, resolve_teams, team_of
from evohpo.errors import ConfigError

ONE = "team"
# every mpe2 env with its default kwargs -> its teams, agents in env order
EXPECTED: dict[str, dict[str, tuple[str, ...]]] = {
    "simple": {ONE: ("agent_0",)},
    "simple_adversary": {"adversaries": ("adversary_0",), "good": ("agent_0", "agent_1")},
    "simple_crypto": {"adversaries": ("eve_0",), "good": ("bob_0", "alice_0")},
    "simple_push": {"adversaries": ("adversary_0",), "good": ("agent_0",)},
    "simple_reference": {ONE: ("agent_0", "agent_1")},
    "simple_speaker_listener": {ONE: ("speaker_0", "listener_0")},
    "simple_spread": {ONE: ("agent_0", "agent_1", "agent_2")},
    "simple_tag": {"adversaries": ("adversary_0", "adversary_1", "adversary_2"),
                   "good": ("agent_0",)},
    "simple_world_comm": {
        "adversaries": ("leadadversary_0", "adversary_0", "adversary_1", "adversary_2"),
        "good": ("agent_0", "agent_1")},
    "collect_treasure": {ONE: (*(f"collector_{i}" for i in range(6)), "deposit_0", "deposit_1")},
    "simple_formation": {ONE: tuple(f"agent_{i}" for i in range(4))},
    "simple_line": {ONE: tuple(f"agent_{i}" for i in range(4))},
}


@pytest.fixture(scope="module")
def tag():
    return probe("simple_tag", {})


def _err(spec, given) -> str:
    with pytest.raises(ConfigError) as ei:
        resolve_teams(spec, given)
    msg = str(ei.value)
    assert "\n" not in msg and "'env.teams'" in msg and ", ".join(spec.agents) in msg
    return msg


# ----------------------------------------------------------------------------- derived teams


def test_every_mpe2_env_has_its_expected_teams():
    assert set(EXPECTED) == set(MPE2_ENVS)


@pytest.mark.parametrize("name", list(MPE2_ENVS))
def test_probe_derives_the_teams_of_every_mpe2_env(name):
    spec = probe(name, {})
    assert spec.teams == EXPECTED[name]
    assert derive_teams(name, spec.agents) == EXPECTED[name]
    assert [tuple(t) for t in spec.team_list()] == list(EXPECTED[name].items())
    assert sorted(a for _, agents in spec.team_list() for a in agents) == sorted(spec.agents)


def test_teams_follow_the_env_kwargs():
    spec = probe("simple_tag", {"num_good": 2, "num_adversaries": 1})
    assert spec.teams == {"adversaries": ("adversary_0",), "good": ("agent_0", "agent_1")}
    assert probe("simple_adversary", {"N": 3}).teams["good"] == ("agent_0", "agent_1", "agent_2")


def test_envs_outside_mpe2_are_one_team():
    spec = probe("tests.toy_envs:target_game", {})
    assert spec.teams == {ONE: spec.agents}
    assert derive_teams("callable:game-7f", ["a", "b"]) == {ONE: ("a", "b")}
    # not a competitive mpe2 name, even with adversary-like agent names
    assert derive_teams("pkg.mod:make", ["adversary_0", "agent_0"]) == {
        ONE: ("adversary_0", "agent_0")}


def test_a_spec_without_teams_is_one_team(tag):
    bare = dataclasses.replace(tag, teams={})
    assert [tuple(t) for t in bare.team_list()] == [(ONE, tag.agents)]
    assert team_of(bare, "agent_0") == ONE
    assert bare == tag  # equal spaces: teams do not take part


def test_team_of(tag):
    assert [team_of(tag, a) for a in tag.agents] == ["adversaries"] * 3 + ["good"]
    with pytest.raises(KeyError, match="nobody"):
        team_of(tag, "nobody")


# ----------------------------------------------------------------------------- env.teams


def test_none_keeps_the_derived_teams(tag):
    assert resolve_teams(tag, None) is tag


def test_glob_patterns_and_names(tag):
    spec = resolve_teams(tag, {"predators": ["adversary_*"], "prey": ["agent_0"]})
    assert spec.teams == {"predators": ("adversary_0", "adversary_1", "adversary_2"),
                          "prey": ("agent_0",)}
    assert spec.agents == tag.agents and spec.per_agent == tag.per_agent
    assert team_of(spec, "adversary_1") == "predators"


def test_teams_list_agents_in_env_order(tag):
    spec = resolve_teams(tag, {"b": ["agent_0", "adversary_2"], "a": ["adversary_1",
                                                                       "adversary_0"]})
    assert spec.teams == {"b": ("adversary_2", "agent_0"), "a": ("adversary_0", "adversary_1")}
    assert [t.name for t in spec.team_list()] == ["b", "a"]  # teams in the order given


def test_overlapping_patterns_in_one_team_are_fine(tag):
    spec = resolve_teams(tag, {"all": ["*", "agent_0"]})
    assert spec.teams == {"all": tag.agents}


def test_character_classes(tag):
    spec = resolve_teams(tag, {"x": ["adversary_[01]"], "y": ["adversary_2", "agent_?"]})
    assert spec.teams["x"] == ("adversary_0", "adversary_1")


def test_pattern_matching_no_agent(tag):
    msg = _err(tag, {"predators": ["adversary_*"], "prey": ["agent_*", "bunny_*"]})
    assert "'bunny_*'" in msg and "'prey'" in msg


def test_agent_in_two_teams(tag):
    msg = _err(tag, {"predators": ["adversary_*", "agent_0"], "prey": ["agent_*"]})
    assert "'agent_0'" in msg and "two teams" in msg


def test_agent_in_no_team(tag):
    msg = _err(tag, {"predators": ["adversary_0", "adversary_1"], "prey": ["agent_*"]})
    assert "'adversary_2' in no team" in msg


def test_empty_team(tag):
    assert "'prey'" in _err(tag, {"predators": ["*"], "prey": []})


def test_no_teams(tag):
    assert "{}" in _err(tag, {})


def test_a_string_instead_of_a_list(tag):
    assert "'agent_0'" in _err(tag, {"predators": ["adversary_*"], "prey": "agent_0"})


def test_empty_team_name(tag):
    assert "''" in _err(tag, {"": ["*"]})


# ----------------------------------------------------------------------------- config, spec_for


def test_config_key_env_teams():
    assert C.load([]).env.teams is None
    cfg = C.load([{"env": {"name": "simple_tag"}},
                  C.parse_override("env.teams={predators: [adversary_*], prey: [agent_0]}")])
    assert cfg.env.teams == {"predators": ["adversary_*"], "prey": ["agent_0"]}
    assert C.load([C.to_dict(cfg)]).env.teams == cfg.env.teams  # round trip
    assert any(key == "env.teams" for key, _, _ in C.describe_keys())


@pytest.mark.parametrize(("value", "says"), [
    (["adversary_*"], "config key 'env.teams': ['adversary_*'] is not a mapping of str to a "
                      "list of str or null"),
    ({"prey": "agent_0"}, "config key 'env.teams.prey': 'agent_0' is not a list of str"),
    ({"prey": [0]}, "config key 'env.teams.prey[0]': 0 is not str"),
    ({1: ["agent_0"]}, "config key 'env.teams': the key 1 is not a str"),
])
def test_config_rejects_bad_types(value, says):
    with pytest.raises(ConfigError) as ei:
        C.load([{"env": {"teams": value}}])
    assert str(ei.value) == says


def test_spec_for():
    env = C.load([{"env": {"name": "simple_tag", "teams": {"predators": ["adversary_*"],
                                                         "prey": ["agent_*"]}}}]).env
    spec = spec_for(env)
    assert spec == probe("simple_tag", {})
    assert [t.name for t in spec.team_list()] == ["predators", "prey"]
    assert spec_for(C.load([{"env": {"name": "simple_push"}}]).env).teams == EXPECTED["simple_push"]
    bad = C.load([{"env": {"name": "simple_push", "teams": {"a": ["adversary_0"]}}}]).env
    with pytest.raises(ConfigError, match="'agent_0' in no team"):
        spec_for(bad)


def test_pools_carry_the_teams(tag):
    spec = resolve_teams(tag, {"predators": ["adversary_*"], "prey": ["agent_*"]})
    for backend in ("pettingzoo", "batched"):
        pool = make_pool("simple_tag", {}, 2, "sync", spec, backend=backend)
        try:
            assert pool.spec.teams == spec.teams
        finally:
            pool.close()
    pool = make_pool("simple_tag", {}, 2, backend="batched")
    try:
        assert pool.spec.teams == EXPECTED["simple_tag"]
    finally:
        pool.close()


def test_evohpo_envs_shows_the_teams(capsys):
    assert main(["envs"]) == 0
    out = capsys.readouterr().out
    assert ("teams: adversaries (adversary_0, adversary_1, adversary_2) vs good (agent_0)"
            in out)
    assert "teams: adversaries (eve_0) vs good (bob_0, alice_0)" in out
    assert out.count("teams: one team") == 7
    assert out.count("teams:") == len(MPE2_ENVS)
