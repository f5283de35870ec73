"""The Ray backend's pieces that need no Ray: config checks, the message without Ray, actor
counts, group configs, and moving replay rows between copies. (Runs on Ray: tests/test_ray.py.)"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from evohpo import config as C
from evohpo.algos.buffer import ReplayBuffer
from evohpo.cli import main
from evohpo.envs import probe
from evohpo.errors import ConfigError
from evohpo.runtime.ray import resolve_resources
from evohpo.runtime.ray.group import add_rows, group_config, new_rows
from tests.test_trainer import TINY

NO_RAY = "Ray is not installed; pip install 'evohpo[ray]'"


def test_backend_ray_without_ray_says_how_to_install(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError
    run = tmp_path / "run"
    assert main(["train", "--steps", "32", "--run-dir", str(run), "--backend", "ray"]) == 2
    err = capsys.readouterr().err
    assert NO_RAY in err and len(err.strip().splitlines()) == 1 and not run.exists()
    assert main(["train", "--steps", "32", "--run-dir", str(run),
                 "--set", "distributed.backend=ray"]) == 2
    assert NO_RAY in capsys.readouterr().err
    sweep = tmp_path / "s.yaml"
    sweep.write_text("steps: 32\n")
    assert main(["sweep", str(sweep), "--out-dir", str(tmp_path / "out"), "--backend", "ray"]) == 2
    assert NO_RAY in capsys.readouterr().err and not (tmp_path / "out").exists()


def test_distributed_keys_are_checked() -> None:
    with pytest.raises(ConfigError,
                       match=r"'distributed.num_actors': 3 must divide population.size \(4\) .*"
                             r"allowed 0 \(auto\), 1, 2, 4"):
        C.load([{"distributed": {"num_actors": 3}}])
    with pytest.raises(ConfigError,
                       match=r"'distributed\.backend': 'dask' is not one of 'local', 'ray'"):
        C.load([{"distributed": {"backend": "dask"}}])
    with pytest.raises(ConfigError,
                       match=r"'distributed.cpus_per_actor': 0(\.0)? is out of range; allowed \(0"):
        C.load([{"distributed": {"cpus_per_actor": 0}}])
    with pytest.raises(ConfigError, match=r"'distributed\.gpus_per_actor'"):
        C.load([{"distributed": {"gpus_per_actor": -0.5}}])


def test_actors_and_gpus_fit_the_cluster() -> None:
    def fit(res: dict[str, float], pop: int = 4, device: str = "auto", hidden: int = 256,
            **d: object) -> tuple[int, float]:
        cfg = {"population": {"size": pop}, "env": {"num_envs": pop}, "device": device,
               "algo": {"hidden": [hidden, hidden], "batch_size": 256}, "distributed": d}
        return resolve_resources(C.load([cfg]), res)

    assert fit({"CPU": 2.0}, pop=8) == (2, 0.0)
    assert fit({"CPU": 5.0}, pop=6) == (3, 0.0)            # the most actors dividing the population
    assert fit({"CPU": 64.0}) == (4, 0.0)                  # at most one per member
    assert fit({"CPU": 64.0, "GPU": 1.0}, pop=16) == (16, 0.0625)  # null: the GPUs shared evenly
    assert fit({"CPU": 64.0, "GPU": 8.0}) == (4, 1.0)      # at most one GPU each
    assert fit({"CPU": 64.0, "GPU": 1.0}, device="cpu") == (4, 0.0)
    # auto with networks too small to gain from a GPU (evohpo.devices) asks for none ...
    assert fit({"CPU": 64.0, "GPU": 1.0}, hidden=64) == (4, 0.0)
    # ... unless the run names one
    assert fit({"CPU": 64.0, "GPU": 1.0}, hidden=64, device="cuda") == (4, 0.25)
    # four actors per GPU
    assert fit({"CPU": 64.0, "GPU": 2.0}, pop=16, gpus_per_actor=0.25) == (8, 0.25)
    with pytest.raises(ConfigError, match="do not fit the Ray cluster"):
        fit({"CPU": 2.0}, num_actors=4)
    with pytest.raises(ConfigError, match="does not fit"):
        fit({"CPU": 8.0}, gpus_per_actor=0.25)
    with pytest.raises(ConfigError,
                       match=r"'device': 'cuda', but the Ray cluster \(8 CPUs, 0 GPUs\) gives"):
        fit({"CPU": 8.0}, device="cuda")


def test_group_config_is_one_actors_share() -> None:
    cfg = C.load([TINY, {"population": {"size": 4}, "env": {"num_envs": 8},
                         "evolution": {"learning_delay": 50, "tournament_size": 3}}])
    g = group_config(cfg, 2)
    assert (g.population.size, g.env.num_envs, g.evolution.tournament_size) == (2, 4, 2)
    assert g.evolution.learning_delay == 25 and g.distributed.backend == "local"
    # ceil: learns when the population would
    assert group_config(cfg, 4).evolution.learning_delay == 13
    assert not g.checkpoint.enabled and g.env.workers == 1  # the actor's one CPU
    # auto becomes what the actor was given: a share of a GPU, or none (Ray hides the rest)
    auto = C.replace(cfg, device="auto")
    assert (group_config(auto, 2, 0.5).device, group_config(auto, 2).device) == ("cuda", "cpu")
    assert group_config(cfg, 2, 0.5).device == "cpu"  # TINY's device: cpu


def test_rows_move_between_replay_copies_across_the_wrap() -> None:
    spec = probe("simple_speaker_listener", {})
    a, b = ReplayBuffer(spec, 10), ReplayBuffer(spec, 10)
    rng = np.random.default_rng(0)

    def step(buf: ReplayBuffer, n: int) -> None:
        obs = {x: rng.random((n, spec[x].obs_dim), dtype=np.float32) for x in spec.agents}
        act = {x: rng.random((n, spec[x].act_dim), dtype=np.float32) for x in spec.agents}
        rew = {x: rng.random(n, dtype=np.float32) for x in spec.agents}
        term = {x: np.zeros(n, bool) for x in spec.agents}
        buf.add(obs, act, rew, obs, term)

    step(a, 7)
    since = a.added
    step(a, 6)  # wraps: rows 7, 8, 9, 0, 1, 2
    rows = new_rows(a, since)
    assert len(rows["rewards"]) == 6
    np.testing.assert_array_equal(rows["obs"], a.obs[[7, 8, 9, 0, 1, 2]])
    assert add_rows(b, rows) == 6 and len(b) == 6 and b.added == 6
    np.testing.assert_array_equal(b.rewards[:6], rows["rewards"])
    # 12 rows into 10: the newest stay
    add_rows(b, {k: np.concatenate([v, v]) for k, v in rows.items()})
    assert len(b) == 10 and b.pos == 6
    np.testing.assert_array_equal(b.obs[6:10], rows["obs"][2:6])
