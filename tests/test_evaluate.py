"""Evaluation episodes: a seed names its episodes, different seeds play unrelated ones, every
pool resets each env with the seed given, and the documented `evohpo eval RUN` reproduces the
score stored in best.pt."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

import evohpo
from evohpo import checkpoint
from evohpo.cli import main
from evohpo.envs import make_pool, probe
from evohpo.loop.best import BestKeeper
from tests import toy_envs

RUN = {"steps": 96, "seed": 3, "device": "cpu",
       "env": {"name": "tests.toy_envs:seed_recorder", "num_envs": 2, "pool": "sync"},
       "population": {"size": 2}, "evolution": {"evo_steps": 16, "learning_delay": 0},
       "algo": {"batch_size": 8, "learn_step": 4, "hidden": [16]},
       "eval": {"episodes": 2, "confirm_episodes": 12},
       "buffer": {"capacity": 1000}, "logging": {"console": False}}


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("evaluate") / "run"
    evohpo.train(RUN, run_dir=path)
    return path


def played(*argv: str) -> list[int | None]:
    """The env seeds of the episodes `evohpo ARGV` played."""
    toy_envs.PLAYED.clear()
    assert main(list(argv)) == 0
    return list(toy_envs.PLAYED)


def printed_fitness(out: str) -> str:
    (line,) = [x for x in out.splitlines() if x.strip().startswith("fitness")]
    return line.split("return")[1].split("+-")[0].strip()


def test_eval_at_seeds_one_and_two_plays_no_episode_of_the_other(
        run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    one = played("eval", str(run), "--seed", "1", "--episodes", "100")
    two = played("eval", str(run), "--seed", "2", "--episodes", "100")
    assert len(one) == len(set(one)) == 100 and len(two) == len(set(two)) == 100
    assert not set(one) & set(two)
    # the same seed plays the same episodes, and fewer episodes are the first of them
    assert played("eval", str(run), "--seed", "1", "--episodes", "100") == one
    assert played("eval", str(run), "--seed", "1", "--episodes", "7") == one[:7]
    assert "100 episodes, seed 2" in capsys.readouterr().out


def test_the_documented_eval_command_reproduces_best_pts_score(
        run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    meta, _ = checkpoint.load(run / "checkpoints" / "best.pt")
    best = meta["member"]
    assert best["episodes"] == 12
    capsys.readouterr()
    seeds = played("eval", str(run))  # the command the quickstart gives
    out = capsys.readouterr().out
    assert f"12 episodes, seed {best['eval_seed']} (the episodes of best.pt's fitness" in out
    assert printed_fitness(out) == f"{best['fitness']:.3f}"
    assert seeds == played("eval", str(run), "--seed", str(best["eval_seed"]), "--episodes", "12")
    # and from Python, to the last bit
    returns = evohpo.load_run(run).evaluate("best")
    assert sum(r.mean() for r in returns.values()) == best["fitness"]
    for a, r in returns.items():
        assert r.mean() == best["per_agent"][a]


def test_run_evaluate_plays_the_episodes_of_its_seed(run: Path) -> None:
    r = evohpo.load_run(run)

    def evaluate(seed: int) -> tuple[list[int | None], dict[str, np.ndarray]]:
        toy_envs.PLAYED.clear()
        returns = r.evaluate("best", episodes=6, seed=seed)
        return list(toy_envs.PLAYED), returns

    (one, r1), (again, r1b), (two, r2) = evaluate(1), evaluate(1), evaluate(2)
    assert one == again and all(np.array_equal(r1[a], r1b[a]) for a in r1)  # reproducible
    assert one == played("eval", str(run), "--seed", "1", "--episodes", "6")  # eval's episodes
    assert len(set(one)) == 6 and not set(one) & set(two)
    assert not np.array_equal(r1["mover"], r2["mover"])  # other episodes, other returns


@pytest.mark.parametrize("pool", ["sync", "async", "batched"])
def test_every_pool_resets_each_env_with_the_seed_given(pool: str) -> None:
    from mpe2 import simple_spread_v3

    spec = probe("simple_spread", {})
    seeds = [11, 5, 2**32 - 1]
    backend = "batched" if pool == "batched" else "pettingzoo"
    p = make_pool("simple_spread", {}, 3, "sync" if pool == "batched" else pool, spec,
                  backend=backend)
    try:
        obs = p.reset(seed=seeds)
        for i, s in enumerate(seeds):
            env = simple_spread_v3.parallel_env()
            want, _ = env.reset(seed=s)
            for a in spec.agents:
                np.testing.assert_allclose(obs[a][i], want[a], atol=1e-6)
        with pytest.raises(ValueError, match="2 seeds for a pool of 3 envs"):
            p.reset(seed=seeds[:2])
        again = p.reset(seed=4)  # one int: env i with 4 + i, as training pools are seeded
        first, _ = simple_spread_v3.parallel_env().reset(seed=6)
        np.testing.assert_allclose(again["agent_0"][2], first["agent_0"], atol=1e-6)
    finally:
        p.close()


def test_an_older_runs_best_pt_loads_and_eval_says_its_score_was_on_other_episodes(
        run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import shutil

    old = tmp_path / "old"
    shutil.copytree(run, old)
    best = old / "checkpoints" / "best.pt"
    meta, tensors = checkpoint.load(best)
    del meta["member"]["seeding"]  # as an older evohpo wrote it
    checkpoint.save(best, meta, tensors)
    capsys.readouterr()
    assert main(["eval", str(old)]) == 0
    out = capsys.readouterr().out
    assert (f"seed {meta['member']['eval_seed']} (best.pt's seed; its fitness "
            f"{meta['member']['fitness']:.3f} was measured by an older evohpo, on other "
            "episodes)") in out
    assert main(["export", str(old), "--out", str(tmp_path / "policies")]) == 0
    assert evohpo.load_run(old).member("best").id == meta["member"]["id"]
    # resumed, its kept member's record keeps saying so until it is scored on new episodes
    latest, tensors = checkpoint.load(old / "checkpoints" / "latest.pt")
    del latest["best"]["seeding"]
    r = evohpo.load_run(old)
    keeper = BestKeeper(r.config, r.spec, list(r.spec.agents))
    keeper.load_state_dict(latest, tensors, torch.device("cpu"))
    assert keeper.record()["seeding"] is None
    assert keeper.record()["fitness"] == latest["best"]["fitness"]
