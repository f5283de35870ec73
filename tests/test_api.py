"""The Python API: the README's example runs as written; callbacks, overrides, env callables."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

import evohpo
from evohpo import api
from evohpo.cli import main
from evohpo.envs.registry import CALLABLE_ENVS, register_env
from evohpo.report.data import read_jsonl
from tests.toy_envs import target_game

README = Path(__file__).resolve().parent.parent / "README.md"
TINY = {"steps": 96, "device": "cpu", "env": {"name": "tests.toy_envs:target_game", "num_envs": 2,
                                             "pool": "sync"},
        "population": {"size": 2}, "evolution": {"evo_steps": 16, "learning_delay": 0},
        "algo": {"batch_size": 8, "learn_step": 4, "hidden": [16]}, "eval": {"episodes": 2},
        "buffer": {"capacity": 1000}, "logging": {"console": False}}


def readme_example() -> str:
    text = README.read_text()
    section = text[text.index("## From Python"):]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)  # type: ignore[union-attr]


def test_the_readme_example_runs_as_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    exec(compile(readme_example(), "README.md", "exec"), {"__name__": "__main__"})
    out = capsys.readouterr().out.strip().splitlines()
    metrics = read_jsonl(tmp_path / "runs" / "py" / "metrics.jsonl")
    assert metrics and out[0].split()[:2] == ["0", str(metrics[0]["env_steps"])]
    acts = next(i for i, line in enumerate(out) if line.startswith("{'agent_0'"))
    assert np.isfinite(float(out[acts - 1]))  # the best member's mean return, re-evaluated
    assert "'agent_1'" in "".join(out[acts:])  # its actions for one observation per agent
    cfg = yaml.safe_load((tmp_path / "runs" / "py" / "config.yaml").read_text())
    assert cfg["env"]["name"].startswith("callable:") and cfg["evolution"]["evo_steps"] == 1500


def test_train_returns_metrics_and_a_callback_stops_it(tmp_path: Path) -> None:
    seen: list[api.GenerationInfo] = []

    def stop_at_two(gen: api.GenerationInfo) -> bool:
        seen.append(gen)
        return gen.generation == 1

    result = evohpo.train(TINY, run_dir=tmp_path / "r", callbacks=[stop_at_two],
                          overrides={"algo.lr_actor": 3e-4, "population.size": 2})
    assert [g.generation for g in seen] == [0, 1] and result.summary["generations"] == 2
    assert [m["generation"] for m in result.metrics] == [0, 1]
    logged = read_jsonl(tmp_path / "r" / "metrics.jsonl")
    assert ([m["eval/best_fitness"] for m in result.metrics]
            == [r["eval/best_fitness"] for r in logged])
    assert result.config.algo.lr_actor == 3e-4 and result.summary["env_steps"] == 64
    assert all(r["kind"] != "diverged" for g in seen for r in g.records)
    # the stopped run resumes to its budget, and its member acts on single observations
    resumed = evohpo.resume(tmp_path / "r")
    assert resumed.summary["env_steps"] == 96
    agent = evohpo.load_run(tmp_path / "r").member("best")
    obs = {a: np.zeros(agent.algo.spec[a].obs_dim) for a in agent.algo.spec.agents}
    acts = agent.act(obs)
    assert set(acts) == set(agent.algo.spec.agents)


@pytest.mark.parametrize("continuous", [True, False])
def test_a_member_acts_on_one_observation_as_pettingzoo_takes_it(tmp_path: Path,
                                                                 continuous: bool) -> None:
    from mpe2 import simple_speaker_listener_v4

    env_cfg = {**TINY["env"], "name": "simple_speaker_listener",
               "kwargs": {"continuous_actions": continuous}}
    evohpo.train({**TINY, "env": env_cfg}, run_dir=tmp_path / "r")
    agent = evohpo.load_run(tmp_path / "r").member("best")
    env = simple_speaker_listener_v4.parallel_env(continuous_actions=continuous)
    obs, _ = env.reset(seed=0)
    while env.agents:  # one observation per agent in, one action per agent out, as env.step wants
        acts = agent.act(obs)
        assert all(env.action_space(a).contains(acts[a]) for a in env.agents), acts
        obs, *_ = env.step(acts)
    batch = agent.act({a: np.zeros((3, agent.algo.spec[a].obs_dim)) for a in obs})
    for a, v in batch.items():  # a batch stays a batch, even of one
        assert v.shape == ((3,) if not continuous else (3, agent.algo.spec[a].act_dim))
    one = agent.act({a: np.zeros((1, agent.algo.spec[a].obs_dim)) for a in obs})
    assert all(len(v) == 1 for v in one.values())


def test_a_members_actions_are_its_actors_outputs_without_noise(tmp_path: Path) -> None:
    import torch

    evohpo.train(TINY, run_dir=tmp_path / "r")
    agent = evohpo.load_run(tmp_path / "r").member("best")
    spec = agent.algo.spec
    rng = np.random.default_rng(0)
    obs = {a: rng.uniform(-1, 1, (64, spec[a].obs_dim)).astype(np.float32) for a in spec.agents}
    got = agent.act(obs)
    with torch.no_grad():  # the deterministic policy, in plain torch: squashed mean, argmax
        out = {a: agent.algo.actors[a](torch.from_numpy(obs[a])) for a in spec.agents}
    mover = spec["mover"]
    np.testing.assert_allclose(
        got["mover"], mover.low + (mover.high - mover.low) * torch.sigmoid(out["mover"]).numpy(),
        atol=1e-6)
    np.testing.assert_array_equal(got["picker"], out["picker"].argmax(1).numpy())
    again = agent.act(obs)
    assert all(np.array_equal(again[a], got[a]) for a in spec.agents)


def test_an_importable_factory_is_stored_by_name_and_a_lambda_in_process() -> None:
    assert register_env(target_game) == "tests.toy_envs:target_game"

    def local(**kw: Any) -> Any:
        return target_game(**kw)

    name = register_env(local)
    assert name.startswith("callable:") and CALLABLE_ENVS[name] is local
    cfg, _ = api.resolve(TINY, env=local)
    assert cfg.env.name == name


def test_a_script_callables_run_resumed_from_the_command_line_is_one_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A run trained on a callable only its own process knew, stopped by a callback so that it
    can be resumed, then resumed from the command line (a process that does not know it): one
    line saying why and what to do, nothing printed before it, no file of the run touched."""
    from tests.test_user_errors import files_of

    def make_env(**kwargs: Any) -> Any:  # a function in a script: not importable by name
        return target_game(**kwargs)

    run = tmp_path / "r"
    evohpo.train({**TINY, "logging": {"console": True}}, env=make_env, run_dir=run,
                 callbacks=[lambda gen: True])
    monkeypatch.delitem(CALLABLE_ENVS, register_env(make_env))  # as another process sees it
    before = files_of(run)
    capsys.readouterr()
    assert main(["train", "--resume", str(run)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1, (out, err)
    assert "module:factory" in err and "evohpo.load_run(run_dir, env=make_env)" in err
    assert files_of(run) == before


def test_a_preset_by_name_and_overrides_as_text() -> None:
    cfg, notes = api.resolve("matd3_speaker_listener", overrides=["algo.lr_actor=0.002"], seed=4)
    assert cfg.algo.name == "matd3" and cfg.env.name == "simple_speaker_listener"
    assert cfg.algo.lr_actor == 0.002 and cfg.seed == 4 and notes == []
    _, notes = api.resolve(algo="maddpg", env="simple_spread")
    assert notes and "maddpg_spread.yaml" in notes[0]


SCRIPT = """import sys
import evohpo
from tests.toy_envs import target_game

def make_env(**kwargs):  # defined in a script: no other process can import it by name
    return target_game(**kwargs)

TINY = {tiny!r}
if sys.argv[1] == "train":
    evohpo.train(TINY, env=make_env, run_dir="run")
elif sys.argv[1] == "load":
    run = evohpo.load_run("run", env=make_env)
    acts = run.member("best").act({{"mover": [0.0, 0.0, 0.0], "picker": [0.0, 0.0]}})
    print(sorted(acts), run.evaluate("best", episodes=2)["mover"].shape)
else:
    evohpo.load_run("run").member("best")
"""


def test_a_run_trained_on_a_script_callable_loads_elsewhere_given_the_env(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    (tmp_path / "script.py").write_text(SCRIPT.format(tiny=TINY))
    env = {**os.environ, "PYTHONPATH": str(README.parent)}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, *args], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=300)

    assert run("script.py", "train").returncode == 0
    loaded = run("script.py", "load")  # another process, passing the callable again
    assert loaded.returncode == 0, loaded.stderr
    assert loaded.stdout.strip() == "['mover', 'picker'] (2,)"
    missing = run("script.py", "without")
    assert "evohpo.load_run(run_dir, env=make_env)" in missing.stderr.strip().splitlines()[-1]
    cli = run("-m", "evohpo", "eval", "run")  # the command line: one line naming the way out
    assert cli.returncode == 2 and len(cli.stderr.strip().splitlines()) == 1, cli.stderr
    assert "module:factory" in cli.stderr and "load_run(run_dir, env=" in cli.stderr
