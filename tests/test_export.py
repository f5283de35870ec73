"""Exported policies outside evohpo: batches of float32 or float64 observations, one observation
as a batch of one, and the README's example playing an exported team in plain mpe2."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from evohpo.cli import main
from evohpo.playback import load as playback
from tests.test_checkpoint import train

README = Path(__file__).resolve().parent.parent / "README.md"


@pytest.fixture(scope="module", params=[False, True], ids=["discrete", "continuous"])
def exported(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("exported")
    assert (
        train(
            base / "run", 64, "--set", f"env.kwargs.continuous_actions={str(request.param).lower()}"
        )
        == 0
    )
    assert main(["export", str(base / "run"), "--out", str(base / "policies")]) == 0
    return base


def test_policy_takes_float32_and_float64_batches_and_one_observation(exported: Path) -> None:
    note = json.loads((exported / "policies" / "spaces.json").read_text())
    _, spec, algo, _ = playback.load_member(exported / "run")
    rng = np.random.default_rng(0)
    for a, s in note["agents"].items():
        policy = torch.export.load(exported / "policies" / s["file"]).module()
        obs = rng.normal(size=(5, spec[a].obs_dim))  # float64, numpy's default
        expected, _ = algo.act(
            {
                b: obs.astype(np.float32) if b == a else np.zeros((5, spec[b].obs_dim), np.float32)
                for b in spec.agents
            },
            None,
        )
        want = expected[a][:, 0].astype(np.int64) if spec[a].discrete else expected[a]
        got64 = policy(torch.from_numpy(obs)).numpy()
        got32 = policy(torch.from_numpy(obs.astype(np.float32))).numpy()
        np.testing.assert_allclose(got64, want, atol=1e-6)
        np.testing.assert_array_equal(got64, got32)
        one = policy(torch.as_tensor(obs[2])[None])[0].numpy()  # one observation: a batch of one
        np.testing.assert_allclose(one, want[2], atol=1e-6)
        assert got32.dtype == (np.int64 if spec[a].discrete else np.float32)


def readme_example() -> str:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    (block,) = [b for b in blocks if "evohpo.playback.exported" in b]
    return block


# what the README's recipe may load of evohpo: the loader, none of the training code
LIGHT = {"evohpo", "evohpo.version", "evohpo.playback", "evohpo.playback.exported"}
CHECK = ("\nimport sys\nassert not env.agents, env.agents\n"
         "loaded = {m for m in sys.modules if m.split('.')[0] == 'evohpo'}\n"
         f"assert loaded <= {LIGHT!r}, loaded\n")


def play_readme_example(base: Path) -> None:
    proc = subprocess.run([sys.executable, "-c", readme_example() + CHECK], cwd=base,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


def test_readme_example_plays_an_exported_team_in_plain_mpe2(exported: Path) -> None:
    play_readme_example(exported)


@pytest.fixture(scope="module")
def adversary(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The simple_adversary preset (env.frames: 2), trained tiny and exported."""
    base = tmp_path_factory.mktemp("adversary")
    assert main(["train", "--algo", "matd3", "--env", "simple_adversary", "--steps", "400",
                 "--quiet", "--run-dir", str(base / "run"),
                 *[a for kv in ("env.pool=sync", "population.size=2", "env.num_envs=2",
                                "games.scripted_opponents=0", "evolution.evo_steps=100",
                                "evolution.learning_delay=0", "algo.batch_size=8",
                                "algo.hidden=[16]", "eval.episodes=1", "buffer.capacity=1000")
                   for a in ("--set", kv)]]) == 0
    assert main(["export", str(base / "run"), "--out", str(base / "policies")]) == 0
    assert json.loads((base / "policies" / "spaces.json").read_text())["frames"] == 2
    return base


def test_readme_example_plays_the_adversary_presets_export_with_frames(adversary: Path) -> None:
    play_readme_example(adversary)


def test_team_stacks_frames_as_training_does(adversary: Path) -> None:
    from evohpo.envs.frames import Stacker
    from evohpo.playback.exported import Team

    _, spec, algo, _ = playback.load_member(adversary / "run")
    team = Team(adversary / "policies")
    env = team.make_env()
    obs, _ = env.reset(seed=3)
    stack = Stacker(spec, 1)
    stack.start({a: np.asarray(o)[None] for a, o in obs.items()})
    team.reset()
    for t in range(6):
        if t:
            stack.push({a: np.asarray(o)[None] for a, o in obs.items()})
        want, _ = algo.act(stack.view(), None)
        got = team.act(obs)  # float32 from mpe2: one observation per agent, one action each
        for a in spec.agents:
            assert got[a].shape == (spec[a].act_dim,)
            np.testing.assert_allclose(got[a], want[a][0], atol=1e-6)
        obs, *_ = env.step(got)
    batch = Team(adversary / "policies")  # a batch of 3, float64: a batch of actions
    rows = {a: np.stack([np.asarray(o, np.float64)] * 3) for a, o in obs.items()}
    out = batch.act(rows)
    assert all(out[a].shape == (3, spec[a].act_dim) for a in spec.agents)
    single = Team(adversary / "policies").act({a: o[0].astype(np.float32) for a, o in rows.items()})
    for a in spec.agents:
        np.testing.assert_allclose(out[a][1], single[a], atol=1e-6)


def test_team_reset_starts_the_next_episode_as_a_fresh_team(adversary: Path) -> None:
    from evohpo.playback.exported import Team

    def after_an_episode(reset: bool) -> tuple[dict, dict]:
        """A team's actions on the next episode's first observations, after playing 5 steps."""
        team = Team(adversary / "policies")
        env = team.make_env()
        obs, _ = env.reset(seed=3)
        for _ in range(5):
            obs, *_ = env.step(team.act(obs))
        obs, _ = env.reset(seed=4)
        if reset:
            team.reset()
        return team.act(obs), obs

    got, obs = after_an_episode(reset=True)
    fresh = Team(adversary / "policies").act(obs)
    for a in fresh:
        np.testing.assert_array_equal(got[a], fresh[a])
    # the last episode's frames would have changed them: the test sees a reset that does nothing
    carried, _ = after_an_episode(reset=False)
    assert any(not np.allclose(carried[a], fresh[a]) for a in fresh)
