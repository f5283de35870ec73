"""Config: defaults, layering, overrides, coercion, validation messages, YAML I/O, round trips."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import yaml

from evohpo import api
from evohpo import config as C
from evohpo.config import Config
from evohpo.errors import ConfigError

CONFIG_DIR = Path(__file__).resolve().parents[1] / "evohpo" / "presets"


def _err(layers: list[dict]) -> str:
    with pytest.raises(ConfigError) as ei:
        C.load(layers)
    return str(ei.value)


# ----------------------------------------------------------------------------- defaults, layering


def test_defaults_build_and_validate():
    cfg = C.load([])
    C.validate(cfg)
    C.validate(Config())
    for f in dataclasses.fields(Config):
        assert getattr(cfg, f.name) == getattr(Config(), f.name), f.name
    assert cfg.algo.name == "matd3"
    assert cfg.algo.lr_actor == 1e-3
    assert cfg.population.size == 4
    assert cfg.env.kwargs == {}
    # mutable defaults are not shared between instances
    assert C.load([]).algo.hidden is not C.load([]).algo.hidden


def test_later_layer_wins_and_untouched_keys_survive():
    base = {"seed": 1, "algo": {"lr_actor": 0.002, "gamma": 0.9}, "population": {"size": 2}}
    top = {"seed": 7, "algo": {"lr_actor": 0.005}}
    cfg = C.load([base, top])
    assert cfg.seed == 7
    assert cfg.algo.lr_actor == 0.005
    assert cfg.algo.gamma == 0.9  # from the lower layer, same section
    assert cfg.population.size == 2
    assert cfg.algo.lr_critic == 1e-3  # default
    # order matters
    assert C.load([top, base]).seed == 1


def test_env_kwargs_merge_across_layers():
    a = {"env": {"name": "simple_spread", "kwargs": {"N": 3, "max_cycles": 25}}}
    b = {"env": {"kwargs": {"max_cycles": 50, "continuous_actions": True}}}
    cfg = C.load([a, b])
    assert cfg.env.name == "simple_spread"
    assert cfg.env.kwargs == {"N": 3, "max_cycles": 50, "continuous_actions": True}


def test_an_empty_mapping_clears_a_presets_shaping_and_kwargs():
    """env.shaping / kwargs / teams merge one level across layers; {} clears what is below."""
    def tag(*overrides: str) -> C.Config:
        return api.resolve(algo="matd3", env="simple_tag", overrides=list(overrides))[0]
    assert tag().env.shaping == {"adversaries": 1.0}  # the preset ships it
    off = tag("env.shaping={}")
    assert off.env.shaping == {} and off.env.kwargs == tag().env.kwargs
    assert tag("env.shaping.good=1").env.shaping == {"adversaries": 1.0, "good": 1.0}
    assert C.load([{"env": {"kwargs": {"N": 3}}}, {"env": {"kwargs": {}}}]).env.kwargs == {}
    teams = {"env": {"teams": {"a": ["agent_0"], "b": ["agent_1"]}}}
    assert C.load([teams, {"env": {"teams": {}}}]).env.teams == {}
    # sections still merge: an empty section changes nothing
    assert C.load([{"algo": {"hidden": [32]}}, {"algo": {}}]).algo.hidden == [32]


def test_load_does_not_mutate_its_layers():
    a = {"env": {"kwargs": {"N": 3}}, "algo": {"hidden": [32]}}
    b = {"env": {"kwargs": {"N": 5}}}
    snapshot = yaml.safe_load(yaml.safe_dump(a))
    C.load([a, b])
    assert a == snapshot


# ----------------------------------------------------------------------------- overrides, coercion


def test_parse_override_nests_dotted_keys():
    assert C.parse_override("population.size=8") == {"population": {"size": 8}}
    assert (C.parse_override("mutation.bounds.tau.max=0.2")
            == {"mutation": {"bounds": {"tau": {"max": 0.2}}}})
    assert C.parse_override("algo.hidden=[32, 16]") == {"algo": {"hidden": [32, 16]}}
    assert C.parse_override("eval.fitness_agents=null") == {"eval": {"fitness_agents": None}}
    # only the first '=' splits
    assert C.parse_override("env.name=mod:f=x") == {"env": {"name": "mod:f=x"}}


@pytest.mark.parametrize("bad", ["algo.lr_actor", "=3", "algo..lr=1", ".x=1", "x.=1"])
def test_parse_override_rejects_malformed(bad):
    with pytest.raises(ConfigError):
        C.parse_override(bad)


def test_scientific_float_override_is_coerced_to_float():
    ov = C.parse_override("algo.lr_actor=3e-4")
    assert ov["algo"]["lr_actor"] == "3e-4"  # YAML 1.1 reads this as a string...
    cfg = C.load([ov])
    assert isinstance(cfg.algo.lr_actor, float)  # ...and config coerces it
    assert cfg.algo.lr_actor == 3e-4


def test_int_from_scientific_notation():
    cfg = C.load([C.parse_override("algo.batch_size=1e3"), C.parse_override("steps=2e6")])
    assert cfg.algo.batch_size == 1000 and type(cfg.algo.batch_size) is int
    assert cfg.steps == 2_000_000 and type(cfg.steps) is int
    # a float that is a whole number is accepted as an int, a fractional one is not
    assert C.load([{"algo": {"learn_step": 20.0}}]).algo.learn_step == 20
    for bad in (2.5, "1.5", "2.5e0"):
        msg = _err([{"algo": {"learn_step": bad}}])
        assert "algo.learn_step" in msg and repr(bad) in msg and "int" in msg


def test_int_given_for_float_becomes_float():
    cfg = C.load([{"algo": {"tau": 1}}])
    assert cfg.algo.tau == 1.0 and type(cfg.algo.tau) is float


def test_bool_strings_and_optional_fields():
    cfg = C.load([{"logging": {"console": "False"},
                   "algo": {"max_grad_norm": None, "policy_delay": 3}}])
    assert cfg.logging.console is False
    assert cfg.algo.max_grad_norm is None
    assert cfg.algo.policy_delay == 3


# ----------------------------------------------------------------------------- errors


def test_unknown_top_level_key_suggests_close_name():
    msg = _err([{"sede": 3}])
    assert "'sede'" in msg
    assert "did you mean" in msg and "seed" in msg


def test_unknown_nested_key_names_full_dotted_path_and_suggests():
    msg = _err([{"algo": {"lr_actr": 1e-3}}])
    assert "'algo.lr_actr'" in msg
    assert "did you mean" in msg and "lr_actor" in msg
    msg = _err([{"mutation": {"bounds": {"tau": {"mn": 0.0}}}}])
    assert "'mutation.bounds.tau.mn'" in msg and "min" in msg


def test_unknown_key_from_override():
    msg = _err([C.parse_override("evolution.tournament=3")])
    assert "'evolution.tournament'" in msg and "tournament_size" in msg


def test_wrong_type_names_key_value_and_type():
    msg = _err([{"population": {"size": "four"}}])
    assert "population.size" in msg and "'four'" in msg and "int" in msg
    msg = _err([{"algo": {"hidden": "64,64"}}])
    assert "algo.hidden" in msg and "list" in msg
    msg = _err([{"algo": {"hidden": [64, "x"]}}])
    assert "algo.hidden[1]" in msg and "'x'" in msg
    msg = _err([{"algo": {"name": "ppo"}}])
    assert "algo.name" in msg and "'ppo'" in msg and "'matd3'" in msg and "'maddpg'" in msg
    msg = _err([{"env": "simple_spread"}])
    assert "'env'" in msg and "mapping" in msg
    msg = _err([{"device": 0}])
    assert "'device'" in msg


@pytest.mark.parametrize("layer,key,value", [
    ({"population": {"size": True}}, "population.size", True),
    ({"algo": {"batch_size": False}}, "algo.batch_size", False),
    ({"seed": True}, "seed", True),
    ({"algo": {"lr_actor": True}}, "algo.lr_actor", True),
    ({"algo": {"max_grad_norm": True}}, "algo.max_grad_norm", True),
])
def test_bool_is_not_a_number(layer, key, value):
    msg = _err([layer])
    assert f"'{key}'" in msg and repr(value) in msg and "is not" in msg


@pytest.mark.parametrize("layer,key,value,allowed", [
    ({"algo": {"lr_actor": -1e-3}}, "algo.lr_actor", "-0.001", "(0, inf]"),
    ({"algo": {"lr_critic": 0}}, "algo.lr_critic", "0", "(0, inf]"),
    ({"population": {"size": 0}}, "population.size", "0", "[1, inf]"),
    ({"algo": {"gamma": 1.5}}, "algo.gamma", "1.5", "[0, 1]"),
    ({"algo": {"gamma": -0.1}}, "algo.gamma", "-0.1", "[0, 1]"),
    ({"algo": {"expl_noise": 2}}, "algo.expl_noise", "2", "[0, 1]"),
    ({"algo": {"tau": 0.0}}, "algo.tau", "0.0", "(0, 1]"),
    ({"mutation": {"weight_fraction": 1.01}}, "mutation.weight_fraction", "1.01", "(0, 1]"),
    ({"seed": -1}, "seed", "-1", "[0, inf]"),
    ({"algo": {"policy_delay": 0}}, "algo.policy_delay", "0", "[1, inf]"),
])
def test_out_of_range_names_key_value_and_allowed_range(layer, key, value, allowed):
    msg = _err([layer])
    assert f"'{key}'" in msg
    assert value in msg
    assert "out of range" in msg
    assert allowed in msg


def test_boundary_values_are_accepted():
    cfg = C.load([{"algo": {"gamma": 1.0, "expl_noise": 0.0, "tau": 1.0}, "env": {"workers": 0}}])
    assert (cfg.algo.gamma, cfg.algo.expl_noise, cfg.algo.tau) == (1.0, 0.0, 1.0)


def test_nan_is_rejected():
    msg = _err([{"algo": {"lr_actor": "nan"}}])
    assert "algo.lr_actor" in msg and "not a finite number" in msg
    msg = _err([{"algo": {"lr_critic": "inf"}}])
    assert "algo.lr_critic" in msg and "not a finite number" in msg


def test_tournament_larger_than_population():
    msg = _err([{"population": {"size": 2}, "env": {"num_envs": 4},
                 "evolution": {"strategy": "tournament", "tournament_size": 3}}])
    assert "evolution.tournament_size" in msg and "3" in msg and "1..2" in msg
    # equal is fine, and other strategies hold no tournaments (a population of 1 included)
    C.load([{"population": {"size": 2}, "env": {"num_envs": 4},
             "evolution": {"strategy": "tournament", "tournament_size": 2}}])
    for strategy in ("truncation", "independent"):
        C.load([{"population": {"size": 1}, "env": {"num_envs": 4},
                 "evolution": {"strategy": strategy}}])


def test_num_envs_must_be_multiple_of_population():
    msg = _err([{"env": {"num_envs": 6}, "population": {"size": 4}}])
    assert "env.num_envs" in msg and "6" in msg and "population.size (4)" in msg
    assert "e.g. 8" in msg
    C.load([{"env": {"num_envs": 12}, "population": {"size": 4}}])


def test_a_presets_num_envs_fits_the_population_size_given():
    # the preset trains 4 members in 8 envs; 6 members get the next multiple of 6, with a note
    cfg, notes = api.resolve(None, algo="matd3", env="simple_spread",
                             overrides=["population.size=6"])
    assert (cfg.population.size, cfg.env.num_envs) == (6, 12)
    assert any(n.startswith("env.num_envs: 12 (8 rounded up to a multiple of 6") for n in notes)
    # a multiple already is left alone, and says nothing
    cfg, notes = api.resolve(None, algo="matd3", env="simple_spread",
                             overrides=["population.size=8"])
    assert cfg.env.num_envs == 8 and not any("num_envs" in n for n in notes)
    # scripted opponents take half of each member's envs: a multiple of twice the population
    cfg, _ = api.resolve(None, algo="matd3", env="simple_tag", overrides=["population.size=8"])
    assert cfg.env.num_envs == 16
    # a preset by name, and the default num_envs under a mapping, are fitted the same way
    assert api.resolve("matd3_speaker_listener",
                       overrides={"population.size": 3})[0].env.num_envs == 9
    assert api.resolve({"population": {"size": 3}})[0].env.num_envs == 9
    # a num_envs the user gives is taken as given: checked, never changed
    assert api.resolve(None, algo="matd3", env="simple_spread",
                       overrides=["population.size=6", "env.num_envs=18"])[0].env.num_envs == 18
    for config, over in ((None, ["population.size=6", "env.num_envs=8"]),
                         ({"population": {"size": 6}, "env": {"num_envs": 8}}, [])):
        with pytest.raises(ConfigError, match="'env.num_envs': 8 must be a multiple of "
                                              r"population.size \(6\)"):
            api.resolve(config, algo="matd3", env="simple_spread", overrides=over)
    # a resumed run's config.yaml names its num_envs: never refitted
    with pytest.raises(ConfigError, match=r"env\.num_envs"):
        C.replace(C.load([]), population={"size": 6})


def test_batch_size_above_capacity():
    msg = _err([{"algo": {"batch_size": 2000}, "buffer": {"capacity": 1500}}])
    assert "algo.batch_size" in msg and "2000" in msg and "buffer.capacity (1500)" in msg


def test_mutation_bound_batch_size_above_capacity():
    bounds = {"mutation": {"bounds": {"batch_size": {"min": 600, "max": 1024}}}}
    msg = _err([{"algo": {"batch_size": 64}, "buffer": {"capacity": 512}}, bounds])
    assert "mutation.bounds.batch_size.min" in msg and "600" in msg and "512" in msg
    # the max is clipped at run time
    C.load([{"algo": {"batch_size": 64}, "buffer": {"capacity": 512},
             "mutation": {"bounds": {"batch_size": {"max": 1024}}}}])


def test_load_keeps_per_hyperparameter_bound_defaults():
    cfg = C.load([])
    assert cfg.mutation.bounds == C.HyperparamSpace()
    assert (cfg.mutation.bounds.batch_size.min, cfg.mutation.bounds.batch_size.max) == (32, 1024)
    assert cfg == Config()


def test_partial_bound_override_keeps_the_other_default():
    tau = C.load([{"mutation": {"bounds": {"tau": {"max": 0.2}}}}]).mutation.bounds.tau
    assert (tau.min, tau.max) == (1e-3, 0.2)


def test_batch_size_bound_min_is_checked_against_capacity():
    # max is clipped at run time
    C.load([{"algo": {"batch_size": 64}, "buffer": {"capacity": 512}}])
    msg = _err([{"algo": {"batch_size": 64}, "buffer": {"capacity": 512},
                 "mutation": {"bounds": {"batch_size": {"min": 600, "max": 700}}}}])
    assert "mutation.bounds.batch_size.min" in msg


def test_describe_keys_shows_bound_defaults():
    defaults = {k: d for k, _, d in C.describe_keys()}
    assert defaults["mutation.bounds.batch_size"].max == 1024  # a range is one key
    assert C.show(defaults["mutation.bounds.lr_actor"]) == \
        "{min: 1e-05, max: 0.01, mutate: true, scale: log}"


def test_mutation_bound_min_above_max():
    msg = _err([{"mutation": {"bounds": {"tau": {"min": 0.5, "max": 0.1}}}}])
    assert "mutation.bounds.tau" in msg and "0.5" in msg and "0.1" in msg
    C.load([{"mutation": {"bounds": {"tau": {"min": 0.05, "max": 0.05}}}}])  # equal is fine


def test_mutation_probabilities_and_factors():
    assert "mutation" in _err([{"mutation": {"none": 0, "hyperparameters": 0, "weights": 0,
                                             "architecture": 0, "activation": 0}}])
    msg = _err([{"mutation": {"factors": [0.8, 0.0]}}])
    assert "mutation.factors" in msg
    assert "mutation.factors" in _err([{"mutation": {"factors": []}}])


def test_hidden_widths():
    assert "algo.hidden" in _err([{"algo": {"hidden": []}}])
    assert "algo.hidden" in _err([{"algo": {"hidden": [64, 0]}}])


@pytest.mark.parametrize("dev", ["gpu", "cuda:", "cuda:x", "CPU", "cuda:-1", "mps0", ""])
def test_bad_device(dev):
    msg = _err([{"device": dev}])
    assert "'device'" in msg and repr(dev) in msg


@pytest.mark.parametrize("dev", ["auto", "cpu", "cuda", "cuda:0", "cuda:12"])
def test_good_device(dev):
    assert C.load([{"device": dev}]).device == dev


# ----------------------------------------------------------------------------- YAML files


def test_read_yaml_missing_file(tmp_path):
    p = tmp_path / "nope.yaml"
    with pytest.raises(ConfigError) as ei:
        C.read_yaml(p)
    assert str(p) in str(ei.value) and "does not exist" in str(ei.value)


def test_read_yaml_invalid_yaml(tmp_path):
    p = tmp_path / "bad.yaml"
    p.write_text("algo:\n  lr_actor: [1, 2\n  gamma: 0.9\n")
    with pytest.raises(ConfigError) as ei:
        C.read_yaml(p)
    assert str(p) in str(ei.value) and "not valid YAML" in str(ei.value)


def test_read_yaml_list_instead_of_mapping(tmp_path):
    p = tmp_path / "list.yaml"
    p.write_text("- seed: 1\n- steps: 2\n")
    with pytest.raises(ConfigError) as ei:
        C.read_yaml(p)
    assert str(p) in str(ei.value) and "mapping" in str(ei.value) and "list" in str(ei.value)


def test_read_yaml_empty_file_is_empty_mapping(tmp_path):
    p = tmp_path / "empty.yaml"
    p.write_text("# only a comment\n")
    assert C.read_yaml(p) == {}


def test_read_yaml_then_load(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text("algo:\n  lr_actor: 3e-4\n  batch_size: 1e2\n"
                 "population:\n  size: 2\nenv:\n  num_envs: 4\n")
    cfg = C.load([C.read_yaml(p)])
    assert cfg.algo.lr_actor == 3e-4 and cfg.algo.batch_size == 100 and cfg.population.size == 2


# ----------------------------------------------------------------------------- round trips


def _custom() -> Config:
    return C.load([{
        "seed": 5, "device": "cpu",
        "env": {"name": "simple_spread", "kwargs": {"N": 3, "continuous_actions": True},
                "num_envs": 6},
        "algo": {"name": "maddpg", "hidden": [32, 16], "lr_actor": "3e-4", "max_grad_norm": None,
                 "target_noise": 0.05},
        "population": {"size": 3},
        "evolution": {"tournament_size": 3, "target_fitness": -12.5},
        "mutation": {"factors": [0.5, 1.0, 2.0],
                     "bounds": {"tau": {"min": 0.002, "max": 0.2, "mutate": False}}},
        "eval": {"fitness_agents": ["agent_0"]},
        "buffer": {"capacity": 50_000},
    }])


@pytest.mark.parametrize("make", [Config, _custom])
def test_to_dict_round_trip(make):
    cfg = make()
    d = C.to_dict(cfg)
    assert isinstance(d, dict) and isinstance(d["mutation"]["bounds"]["tau"], dict)
    back = C.load([d])
    assert back == cfg
    assert C.to_dict(back) == d


@pytest.mark.parametrize("make", [Config, _custom])
def test_dump_round_trip(make):
    cfg = make()
    text = C.dump(cfg)
    assert isinstance(text, str)
    back = C.load([yaml.safe_load(text)])
    assert back == cfg


def test_replace_revalidates():
    cfg = _custom()
    cfg2 = C.replace(cfg, seed=9)
    assert cfg2.seed == 9 and dataclasses.replace(cfg2, seed=5) == cfg
    with pytest.raises(ConfigError):
        C.replace(cfg, population={"size": 4})  # 6 envs is not a multiple of 4


def test_describe_keys_covers_every_leaf():
    keys = {k for k, _, _ in C.describe_keys()}
    assert {"seed", "algo.lr_actor", "mutation.bounds.tau", "env.kwargs"} <= keys
    assert "algo" not in keys and "mutation.bounds" not in keys


def test_shipped_configs_load():
    files = sorted(CONFIG_DIR.glob("*.yaml"))
    assert len(files) >= 4, files
    for f in files:
        data = C.read_yaml(f)
        cfg = C.load([data])
        assert cfg.env.num_envs % cfg.population.size == 0
        assert cfg.algo.name in f.name  # the file name says which algorithm it configures


def test_shipped_strategies_are_what_the_benchmark_chose():
    """PBT (truncation, exploring in place) by default and in the cooperative presets, measured
    best in benchmarks/README.md; the competitive presets keep the tournament they were
    measured with."""
    from evohpo.api import resolve

    assert C.load([]).evolution.strategy == "truncation"
    assert C.load([]).evolution.explore_kept
    coop = [("matd3", "simple_speaker_listener"), ("maddpg", "simple_speaker_listener"),
            ("matd3", "simple_spread"), ("maddpg", "simple_spread")]
    for algo, env in coop:
        ev = resolve(algo=algo, env=env)[0].evolution
        assert (ev.strategy, ev.ready, ev.explore_kept) == ("truncation", 5, True), (algo, env)
    for env in ("simple_tag", "simple_adversary", "simple_push"):
        assert resolve(algo="matd3", env=env)[0].evolution.strategy == "tournament", env


def test_the_config_lists_at_most_114_keys_each_with_a_one_line_doc():
    rows = C.describe_keys()
    assert len(rows) <= 114  # 100, IPPO / MAPPO's seven settings and six bounds, TensorBoard
    assert all(doc and "\n" not in doc and len(doc) <= 90 for _, doc, _ in rows)


@pytest.mark.parametrize(("old", "new"), sorted(C.RENAMED.items()))
def test_a_renamed_key_is_unknown_and_the_error_names_the_new_one(old: str, new: str):
    section, key = old.split(".")
    msg = _err([{section: {key: 1}}])
    assert f"unknown config key '{old}'" in msg and new in msg
    with pytest.raises(C.ConfigError) as ei:
        C.load([C.parse_override(f"{old}=1")])
    assert new in str(ei.value)


def test_ray_refuses_a_numbered_gpu_when_the_config_is_loaded():
    with pytest.raises(C.ConfigError, match=r"config key 'device': 'cuda:1' names a GPU, but Ray"):
        C.load([{"device": "cuda:1", "distributed": {"backend": "ray"}}])
    assert C.load([{"device": "cuda:1"}]).device == "cuda:1"
