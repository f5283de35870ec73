"""Stacked observations (env.frames): what a pool gives per step, at episode ends, across a
checkpoint, and how scripted rules and policies of fewer frames read them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from evohpo import api
from evohpo import config as C
from evohpo.cli import main
from evohpo.envs import make_pool, probe, spec_for
from evohpo.envs.heuristics import heuristic_policy
from evohpo.runtime.evaluate import episode_returns
from tests.test_batched import random_actions
from tests.test_trainer import TINY

KW = {"continuous_actions": True, "max_cycles": 4}  # an episode end every 4 steps


def pools(name: str, frames: int, backend: str, n: int = 3) -> tuple[Any, Any]:
    """A pool of stacked observations and the same envs without."""
    spec = probe(name, KW)
    return (make_pool(name, KW, n, "sync", spec.stacked(frames), backend=backend),
            make_pool(name, KW, n, "sync", spec, backend=backend))


@pytest.mark.parametrize("backend", ["pettingzoo", "batched"])
def test_frames_are_the_last_observations_newest_first(backend: str) -> None:
    framed, plain = pools("simple_adversary", 3, backend)
    spec = plain.spec
    rng = np.random.default_rng(0)
    first = plain.reset(seed=5)
    got = framed.reset(seed=5)
    history = {a: [first[a]] * 3 for a in spec.agents}  # an episode starts standing still
    for a in spec.agents:
        assert got[a].shape == (3, 3 * spec[a].obs_dim)
        np.testing.assert_array_equal(got[a], np.concatenate(history[a], axis=1))
    ends = 0
    for _ in range(10):
        act = random_actions(spec, 3, rng)
        want, res = plain.step(act), framed.step(act)
        np.testing.assert_array_equal(res.done, want.done)
        for a in spec.agents:
            np.testing.assert_array_equal(res.rewards[a], want.rewards[a])
            history[a] = [want.next_obs[a], *history[a][:2]]
            # the stored transition: the real final observation on top of the ones before it
            np.testing.assert_array_equal(res.next_obs[a], np.concatenate(history[a], axis=1))
            restart = np.concatenate([want.obs[a]] * 3, axis=1)
            expect = np.where(want.done[:, None], restart, res.next_obs[a])
            np.testing.assert_array_equal(res.obs[a], expect)
            history[a] = [np.where(want.done[:, None], want.obs[a], h) for h in history[a]]
        ends += int(want.done.sum())
    assert ends == 6  # two episode ends per env


def test_a_pools_state_keeps_its_frames() -> None:
    a, _ = pools("simple_adversary", 2, "batched")
    b, _ = pools("simple_adversary", 2, "batched")
    rng = np.random.default_rng(1)
    a.reset(seed=3)
    for _ in range(6):
        a.step(random_actions(a.spec, 3, rng))
    obs = b.set_state(a.get_state())
    for x, y in zip(a.stack.view().values(), obs.values(), strict=True):
        np.testing.assert_array_equal(x, y)
    for _ in range(5):
        act = random_actions(a.spec, 3, rng)
        ra, rb = a.step(act), b.step(act)
        for x, y in zip(ra.next_obs.values(), rb.next_obs.values(), strict=True):
            np.testing.assert_array_equal(x, y)
    with pytest.raises(Exception, match="no stacked observations"):
        b.set_state([{k: v for k, v in st.items() if k != "frames"} for st in a.get_state()])


def test_heuristic_and_a_policy_of_one_frame_play_alike_on_stacked_observations(
        tmp_path: Path) -> None:
    """The rules and a policy trained on the env's own observations read the newest frame."""
    framed, plain = pools("simple_adversary", 2, "batched", n=6)
    rules = heuristic_policy(framed.spec, "simple_adversary", KW)
    own = heuristic_policy(plain.spec, "simple_adversary", KW)
    got, want = episode_returns(rules, framed, 7), episode_returns(own, plain, 7)
    for a in want:
        np.testing.assert_array_equal(got[a], want[a])
    cfg = C.load([TINY, {"env": {"name": "simple_adversary", "kwargs": KW}, "steps": 32}])
    algo = api.train(cfg, run_dir=tmp_path / "plain", quiet=True).load().member().algo
    got = episode_returns([(algo, ("adversary_0",)), (rules, ("agent_0", "agent_1"))], framed, 7)
    want = episode_returns([(algo, ("adversary_0",)), (own, ("agent_0", "agent_1"))], plain, 7)
    for a in want:
        np.testing.assert_array_equal(got[a], want[a])


def test_a_framed_run_trains_evaluates_renders_and_exports(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    over = {"env": {"name": "simple_adversary", "kwargs": KW, "frames": 2}, "steps": 32}
    cfg = C.load([TINY, over])
    spec = spec_for(cfg.env)
    assert spec.frames == 2 and spec["agent_0"].obs_dim == 2 * probe(
        "simple_adversary", KW)["agent_0"].obs_dim
    assert "2 frames of" in spec.describe()
    api.train(cfg, run_dir=tmp_path / "a", quiet=True)
    api.train(C.load([TINY, {**over, "env": {**over["env"], "frames": 1}}]),
              run_dir=tmp_path / "b", quiet=True)
    capsys.readouterr()
    for opponent in ("heuristic", str(tmp_path / "b")):
        assert main(["eval", str(tmp_path / "a"), "--against", opponent, "--episodes", "3"]) == 0
    # the other way round: the run of one frame plays on the env of the stacked one
    assert main(["eval", str(tmp_path / "b"), "--against", str(tmp_path / "a"),
                 "--episodes", "3"]) == 0
    assert main(["eval", str(tmp_path / "a"), "--render", str(tmp_path / "ep.gif")]) == 0
    assert (tmp_path / "ep.gif").stat().st_size > 0
    assert main(["export", str(tmp_path / "a"), "--out", str(tmp_path / "x")]) == 0
    assert '"frames": 2' in (tmp_path / "x" / "spaces.json").read_text()


@pytest.mark.parametrize("bad", [0, 17])
def test_frames_out_of_range_is_a_config_error(
        bad: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["train", "--env", "simple_adversary", "--set", f"env.frames={bad}", "--steps",
                 "32", "--run-dir", str(tmp_path / "r"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "env.frames" in err and "Traceback" not in err
