"""The loop end to end: final-observation semantics, budgets, reproducibility, every env via the
CLI."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from evohpo import config as C
from evohpo.algos.buffer import ReplayBuffer
from evohpo.cli import main
from evohpo.envs import MPE2_ENVS, make_env, make_pool, probe
from evohpo.envs.pool import episode_seed
from evohpo.logs.loggers import summary_line
from evohpo.loop.trainer import Trainer

TINY = {
    "steps": 64, "device": "cpu",
    "env": {"num_envs": 2, "pool": "sync"},
    "population": {"size": 2},
    # the tournament: these tests read its lineage (an elite and mutated clones every window)
    "evolution": {"evo_steps": 16, "learning_delay": 0, "strategy": "tournament"},
    "algo": {"batch_size": 8, "learn_step": 4, "hidden": [16]},
    "mutation": {"bounds": {"batch_size": {"min": 4, "max": 64}}},
    "eval": {"episodes": 2},
    "buffer": {"capacity": 1000},
    "logging": {"console": False},
}


def tiny(**over: Any) -> C.Config:
    return C.load([TINY, over])


# members that never change between windows: their update counts stay their own
NO_MUTATION = {"none": 1.0, "hyperparameters": 0.0, "weights": 0.0, "architecture": 0.0,
               "activation": 0.0}


def trained(cfg: C.Config) -> Trainer:
    """A trainer of ``cfg`` after its whole run (closed)."""
    t = Trainer(cfg)
    try:
        t.train()
    finally:
        t.close()
    return t


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.parametrize("continuous", [False, True])
def test_stored_next_obs_at_truncation_is_real_final_obs(continuous: bool) -> None:
    kw = {"continuous_actions": continuous, "max_cycles": 25}
    spec = probe("simple_speaker_listener", kw)
    pool = make_pool("simple_speaker_listener", kw, 1, "sync", spec)
    ref = make_env("simple_speaker_listener", kw)
    buf = ReplayBuffer(spec, 100)
    obs = pool.reset(seed=11)
    ref_obs, _ = ref.reset(seed=11)
    rng = np.random.default_rng(0)
    for _ in range(25):
        acts = {a: (rng.integers(0, spec[a].act_dim, (1, 1)).astype(np.float32) if spec[a].discrete
                    else rng.random((1, spec[a].act_dim)).astype(np.float32)) for a in spec.agents}
        res = pool.step(acts)
        ref_acts = {a: int(acts[a][0, 0]) if spec[a].discrete else acts[a][0] for a in spec.agents}
        ref_obs, *_ = ref.step(ref_acts)
        buf.add(obs, acts, res.rewards, res.next_obs, res.terminated)
        for a in spec.agents:
            np.testing.assert_array_equal(res.next_obs[a][0], ref_obs[a])
        obs = res.obs
    # step 25: mpe2 truncates; the pool reset the env but stored the real final observation
    assert res.done[0] and all(res.truncated[a][0] and not res.terminated[a][0]
                               for a in spec.agents)
    reset_obs, _ = ref.reset(seed=episode_seed(11, 1))  # each episode is reset with its own seed
    for a in spec.agents:
        np.testing.assert_array_equal(res.obs[a][0], reset_obs[a])
        np.testing.assert_array_equal(buf.next_obs[24, buf.obs_slices[a]], ref_obs[a])
    # the listener's final position differs from its new start (the speaker's goal colour may
    # repeat)
    assert not np.array_equal(res.next_obs["listener_0"][0], res.obs["listener_0"][0])
    assert buf.terminated[:25].sum() == 0  # truncation is stored as "bootstrap"


def run_trainer(cfg: C.Config, tmp: Path) -> tuple[list[dict], list[dict]]:
    from evohpo.logs.loggers import JsonlLogger

    tmp.mkdir(parents=True, exist_ok=True)
    log = JsonlLogger(tmp)
    t = Trainer(cfg, log)
    try:
        t.train()
    finally:
        t.close()
        log.close()
    return read_jsonl(tmp / "metrics.jsonl"), read_jsonl(tmp / "lineage.jsonl")


def strip_time(ms: list[dict]) -> list[dict]:
    return [{k: v for k, v in m.items() if not k.startswith("time/")} for m in ms]


def test_same_seed_same_run_and_async_matches_sync(tmp_path: Path) -> None:
    cfg = tiny(steps=160, mutation={"none": 0.0, "hyperparameters": 1.0, "weights": 1.0})
    m1, l1 = run_trainer(cfg, tmp_path / "a")
    m2, l2 = run_trainer(cfg, tmp_path / "b")
    assert strip_time(m1) == strip_time(m2) and l1 == l2
    assert len(l1) > 0 and any(r["kind"] == "hyperparameters" for r in l1)
    # the async pool runs the same envs with the same seeds in workers: same results
    m3, l3 = run_trainer(C.load([C.to_dict(cfg), {"env": {"pool": "async", "workers": 2}}]),
                         tmp_path / "c")
    assert strip_time(m1) == strip_time(m3) and l1 == l3
    # another seed differs
    m4, _ = run_trainer(C.load([C.to_dict(cfg), {"seed": 1}]), tmp_path / "d")
    assert strip_time(m1) != strip_time(m4)


def test_budget_windows_and_final_evaluation(tmp_path: Path) -> None:
    # 2 members x 1 env each; a window is 16 env steps per member = 32 population steps.
    # 80 steps: windows end at 32 and 64, then the budget ends mid-window at 80: a final evaluation.
    ms, lineage = run_trainer(tiny(steps=80), tmp_path)
    assert [m["env_steps"] for m in ms] == [32, 64, 80]
    assert [m["generation"] for m in ms] == [0, 1, 2]
    last = ms[-1]
    assert last["eval/best_fitness"] == max(v for k, v in last.items() if k.endswith("/fitness"))
    # no evolution after the final evaluation; elitism keeps one member per generation
    assert {r["generation"] for r in lineage} == {0, 1}
    assert sum(r["kind"] == "elite" for r in lineage) == 2
    for r in lineage:
        assert r["kind"] in {"birth", "elite", "none", "hyperparameters", "weights", "architecture",
                             "activation"}
        if r["kind"] not in ("elite", "birth"):
            assert r["parent_id"] is not None and r["member_id"] >= 2


def test_learning_delay_and_member_counts(tmp_path: Path) -> None:
    ms, _ = run_trainer(tiny(steps=64, evolution={"evo_steps": 16, "learning_delay": 40}), tmp_path)
    first, second = ms
    assert not any(k.endswith("critic_loss") for k in first)   # nobody learned before 40 steps
    assert any(k.endswith("critic_loss") for k in second)
    steps = [v for k, v in first.items() if k.endswith("/env_steps")]
    assert steps == [16, 16]


def test_target_fitness_stops_early(tmp_path: Path) -> None:
    ms, _ = run_trainer(tiny(steps=10_000, evolution={"target_fitness": -1e9}), tmp_path)
    assert len(ms) == 1 and ms[0]["env_steps"] == 32


MODES = [(env, cont) for env in MPE2_ENVS for cont in (False, True)]


@pytest.mark.parametrize(("env", "continuous"), MODES,
                         ids=[f"{e}-{'cont' if c else 'disc'}" for e, c in MODES])
@pytest.mark.parametrize("pool", ["sync", "async"])
def test_cli_smoke_every_env(env: str, continuous: bool, pool: str, tmp_path: Path,
                             capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "run"
    code = main(["train", "--algo", "matd3" if continuous else "maddpg", "--env", env,
                 "--steps", "48", "--run-dir", str(run), "--quiet",
                 "--set", f"env.kwargs.continuous_actions={str(continuous).lower()}",
                 "--set", "env.kwargs.max_cycles=8", "--set", f"env.pool={pool}",
                 "--set", "env.num_envs=4", "--set", "env.workers=2", "--set", "population.size=2",
                 "--set", "evolution.evo_steps=8", "--set", "evolution.learning_delay=0",
                 "--set", "algo.batch_size=8", "--set", "algo.learn_step=2",
                 "--set", "algo.hidden=[8]",
                 "--set", "eval.episodes=1", "--set", "buffer.capacity=500"])
    assert code == 0
    ms = read_jsonl(run / "metrics.jsonl")
    assert [m["env_steps"] for m in ms] == [16, 32, 48]
    assert all(np.isfinite(m["eval/best_fitness"]) for m in ms)
    # the console's line per generation: the best member, or on a game of several teams each
    # team's champion
    last = ms[-1]
    teams = [k.split("/")[1] for k in last if k.startswith("team/") and k.endswith("/champion")]
    assert [t for t in teams if f"{t} best" in summary_line(last)] == teams
    assert ("best member" in summary_line(last)) == (not teams)
    assert C.read_yaml(run / "config.yaml")["env"]["name"] == env
    assert (run / "lineage.jsonl").exists()
    assert "done: 3 generations" in capsys.readouterr().out


def test_updates_per_learn_keep_a_floor_per_env_step() -> None:
    from evohpo.runtime.clock import updates_per_learn

    def life(learn_step: int, learns: int, floor: float = 0.04, start: int = 0) -> list[int]:
        return [updates_per_learn(start + k * learn_step, learn_step, 1, floor)
                for k in range(1, learns + 1)]

    assert life(25, 8) == [1] * 8                # the presets: unchanged
    assert life(25, 8, start=7) == [1] * 8       # wherever a member's count stands
    assert life(400, 3) == [16] * 3              # not 1 step per 400 env steps
    assert life(30, 5) == [1, 1, 1, 1, 2]        # 6 in 150 env steps: 0.04 each, exactly
    assert life(10, 5) == [1] * 5                # gradient_steps above the floor stands
    assert life(400, 3, floor=0.0) == [1] * 3    # 0: off
    assert updates_per_learn(400, 400, 20, 0.04) == 20


@pytest.mark.parametrize(("floor", "per_learn"), [(0.0, 1), (0.5, 4)])
def test_a_large_learn_step_still_updates_per_env_step(floor: float, per_learn: int,
                                                       tmp_path: Path) -> None:
    # 1 member on both envs, 32 vector steps (64 of its env steps): it learns once per 8 of them,
    # at the start of vector steps 5, 9, ..., 29 (learning runs before a step is counted): 7
    # times; each time 1 gradient step, or 4 where 0.5 per env step is asked for (8 x 0.5).
    # One MATD3 update is one critic step.
    cfg = tiny(steps=64, population={"size": 1},
               evolution={"evo_steps": 1000, "tournament_size": 1},
               algo={"learn_step": 8, "min_updates_per_step": floor}, mutation=NO_MUTATION)
    t = trained(cfg)
    assert t.members[0].algo.updates == 7 * per_learn


def test_each_member_takes_its_own_updates_per_env_step() -> None:
    # min_updates_per_step is a member's own hyperparameter (evolvable): two members of one run,
    # the same learn_step, 0 (one gradient step per learn) and 0.5 (four per learn of 8 steps)
    cfg = tiny(steps=128, population={"size": 2},
               evolution={"evo_steps": 1000, "tournament_size": 1},
               algo={"learn_step": 8, "min_updates_per_step": 0.04}, mutation=NO_MUTATION)
    t = Trainer(cfg)
    try:
        assert [m.algo.hp.min_updates_per_step for m in t.members] == [0.04, 0.04]
        t.members[0].algo.set_hyperparams(min_updates_per_step=0.0)
        t.members[1].algo.set_hyperparams(min_updates_per_step=0.5)
        t.train()
    finally:
        t.close()
    slow, fast = (m.algo.updates for m in t.members)
    assert slow > 0 and fast == 4 * slow
