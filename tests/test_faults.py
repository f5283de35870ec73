"""Bad input and faults: one clear message each, nothing lost, and training goes on."""

from __future__ import annotations

import errno
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from evohpo import checkpoint
from evohpo import config as C
from evohpo.cli import main
from evohpo.errors import ConfigError, Diverged, EnvError
from evohpo.logs.loggers import Logger
from evohpo.loop.trainer import Trainer
from tests.test_trainer import TINY

FAULT = "tests.fault_envs:fault_env"


class Messages(Logger):
    def __init__(self) -> None:
        self.messages: list[str] = []
        self.metrics: list[dict[str, Any]] = []
        self.records: list[dict[str, Any]] = []

    def message(self, text: str) -> None:
        self.messages.append(text)

    def log(self, metrics: dict[str, Any], step: int) -> None:
        self.metrics.append(metrics)

    def lineage(self, records: list[dict[str, Any]]) -> None:
        self.records.extend(records)


def fault_cfg(pool: str = "async", **kwargs: Any) -> C.Config:
    return C.load([TINY, {"steps": 96, "env": {"name": FAULT, "pool": pool, "workers": 2,
                                               "kwargs": kwargs, "worker_timeout": 2.0,
                                               "max_restarts": 2}}])


def run(cfg: C.Config, run_dir: Path | None = None) -> tuple[Trainer, Messages]:
    log = Messages()
    t = Trainer(cfg, log, run_dir)
    try:
        t.train()
    finally:
        t.close()
    return t, log


# ----------------------------------------------------------------------------- bad input

def cli_error(args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    return err


@pytest.mark.parametrize(("args", "expected"), [
    (["--algo", "madpg"],
     "'algo.name': 'madpg' is not one of 'maddpg', 'matd3', 'ippo', 'mappo' (did you mean: maddpg"),
    (["--env", "simple_spred"], "unknown env 'simple_spred' (did you mean: simple_spread"),
    (["--algo", "mappo", "--env", "simple_tag", "--set", "games.scripted_opponents=0.5"],
     "'games.scripted_opponents': 0.5 is for off-policy learners; mappo learns only from"),
    (["--algo", "ippo", "--env", "simple_tag", "--set", "games.opponent_actions=learned"],
     "'games.opponent_actions': 'learned' models the other teams in off-policy critics; ippo"),
    (["--set", "algo.lr_actr=0.1"], "unknown config key 'algo.lr_actr' (did you mean: lr_actor"),
    (["--set", "algo.lr_actor=-1"], "'algo.lr_actor': -1.0 is out of range; allowed (0"),
    (["--set", "population.size=0"], "'population.size': 0 is out of range; allowed [1"),
    (["--set", "population.size=four"], "'population.size': 'four' is not int"),
    (["--set", "evolution.strategy=tournament", "--set", "evolution.tournament_size=9"],
     "'evolution.tournament_size': 9 is larger than population.size"),
    (["--set", "algo.batch_size=5000", "--set", "buffer.capacity=1000"],
     "'algo.batch_size': 5000 is larger than buffer.capacity"),
    (["--config", "/nonexistent.yaml"], "config file '/nonexistent.yaml' does not exist"),
    (["--env", "nosuchmodule_xyz:make"], "cannot import module 'nosuchmodule_xyz'"),
    (["--env", "tests.toy_envs:not_parallel"], "not a PettingZoo ParallelEnv"),
    (["--env", "tests.toy_envs:nothing_here"], "has no callable 'nothing_here'"),
])
def test_bad_input_is_one_line_exit_2(args: list[str], expected: str, tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    err = cli_error(["train", *args, "--run-dir", str(tmp_path / "r"), "--quiet"], capsys)
    assert expected in err
    assert not (tmp_path / "r").exists()  # nothing half-made is left behind


def test_config_not_yaml(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("algo: [unclosed\n")
    assert "is not valid YAML" in cli_error(["train", "--config", str(bad)], capsys)


def test_unsupported_spaces_say_which(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    from gymnasium import spaces

    from tests import toy_envs

    monkeypatch.setattr(toy_envs.TargetGame, "observation_space",
                        lambda self, a: spaces.Dict({"x": spaces.Discrete(2)}))
    err = cli_error(["train", "--env", "tests.toy_envs:target_game", "--run-dir",
                     str(tmp_path / "r")], capsys)
    assert "agent 'mover': observation space Dict" in err and "flat Box observations" in err


def test_run_dir_exists_and_unwritable(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "r"
    run.mkdir()
    (run / "metrics.jsonl").write_text("{}\n")
    assert "already exists" in cli_error(["train", "--run-dir", str(run)], capsys)
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert "is not writable" in cli_error(["train", "--run-dir", str(blocker / "sub")], capsys)


def test_bad_input_in_a_real_process(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "evohpo", "train", "--env", "nope"],
                          capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith("evohpo: error: unknown env 'nope'")


# ----------------------------------------------------------------------------- env faults

def test_worker_crash_restarts_the_pool(tmp_path: Path) -> None:
    t, log = run(fault_cfg(crash_at=7, marker=str(tmp_path / "fired")))
    assert t.restarts == 1 and t.env_steps >= 96
    assert any("injected crash at step 7" in m and "restarting the env pool" in m
               for m in log.messages)
    assert all(np.isfinite(m["eval/best_fitness"]) for m in log.metrics)
    assert log.metrics[-1]["train/env_restarts"] == 1


def test_sync_pool_env_error_restarts_too(tmp_path: Path) -> None:
    t, log = run(fault_cfg("sync", crash_at=5, marker=str(tmp_path / "fired")))
    assert t.restarts == 1 and any("env 0 raised RuntimeError" in m for m in log.messages)


def test_killed_worker_restarts(tmp_path: Path) -> None:
    t, log = run(fault_cfg(exit_at=6, marker=str(tmp_path / "fired")))
    assert t.restarts == 1 and any("exit code 7" in m for m in log.messages)


def test_hung_worker_times_out_and_restarts(tmp_path: Path) -> None:
    t, log = run(fault_cfg(hang_at=6, marker=str(tmp_path / "fired")))
    assert t.restarts == 1 and any("timed out after 2 s" in m for m in log.messages)


def test_lost_step_is_not_stored(tmp_path: Path) -> None:
    """The failed step's transitions are gone; the buffer holds only steps that really happened."""
    t, _ = run(fault_cfg("sync", crash_at=5, marker=str(tmp_path / "fired")))
    assert t.buffer.added == t.env_steps


def test_repeated_failures_stop_cleanly(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["train", "--env", FAULT, "--run-dir", str(tmp_path / "r"), "--quiet",
                 "--steps", "200",
                 "--set", "env.kwargs.crash_at=3", "--set", "env.pool=async",
                 "--set", "env.workers=2", "--set", "env.max_restarts=2",
                 "--set", "env.num_envs=2", "--set", "population.size=2"])
    err = capsys.readouterr().err
    assert code == 1 and "Traceback" not in err
    assert "injected crash at step 3" in err and "failed 3 times (env.max_restarts is 2)" in err


# before the first checkpoint, and after it (windows of 32 steps; the evaluation envs, which
# fault too, play 8 steps a window: by the third failure, at step 120, they are at 24)
@pytest.mark.parametrize("crash_at", [3, 40])
def test_env_raising_in_step_prints_no_signal_lines_and_says_what_is_kept(
        tmp_path: Path, crash_at: int) -> None:
    """One worker's env raises while the other worker waits: each failed pool ends the waiting
    worker with SIGTERM. Workers forked during training (the restarted pools) must not run the
    trainer's SIGTERM handler: only a real signal prints a signal line. The last line says what
    is on disk: no checkpoint (and how to start again), or the checkpoint to resume from."""
    run = tmp_path / "r"
    proc = subprocess.run(
        [sys.executable, "-m", "evohpo", "train", "--env", FAULT, "--run-dir", str(run),
         "--steps", "400", "--set", f"env.kwargs.crash_at={crash_at}",
         "--set", "env.kwargs.crash_one_in=2", "--set", "env.kwargs.horizon=4",
         "--set", "env.pool=async",
         "--set", "env.workers=2", "--set", "env.max_restarts=2", "--set", "env.num_envs=2",
         "--set", "population.size=2", "--set", "evolution.evo_steps=32",
         "--set", "eval.episodes=2", "--set", "algo.hidden=[16]"],
        capture_output=True, text=True, cwd=Path(__file__).parent.parent, timeout=120)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1 and "Traceback" not in out, out
    assert out.count("restarting the env pool with fresh envs") == 2, out
    assert "SIGTERM" not in out and "saving a checkpoint" not in out, out
    last = proc.stderr.strip().splitlines()[-1]
    assert "injected crash" in last and "the env pool failed 3 times" in last, last
    latest = run / "checkpoints" / "latest.pt"
    if crash_at == 3:
        assert not latest.exists()
        assert last.endswith("No checkpoint was written, so there is nothing to resume; start the "
                             f"run afresh with: evohpo train --config {run / 'config.yaml'} "
                             f"--run-dir {run} --overwrite"), last
    else:
        assert checkpoint.load(latest)[0]["generation"] >= 1
        assert last.endswith(f"The run's last checkpoint '{latest}' is kept: resume with evohpo "
                             f"train --resume {run}"), last


def fitness_rows(log: Messages) -> list[dict[str, Any]]:
    return [{k: v for k, v in m.items() if k.endswith("fitness")} for m in log.metrics]


def test_scoring_env_that_raises_is_replaced_and_plays_the_same_episodes(tmp_path: Path) -> None:
    """The scoring envs run in this process (the training envs in the async pool's workers): one
    that raises is replaced within env.max_restarts, as a training worker is, and the members are
    scored again on the same episodes."""
    t, log = run(fault_cfg(score_crash_at=3, marker=str(tmp_path / "fired")))
    clean, clean_log = run(fault_cfg())
    assert t.restarts == 1 and t.env_steps == clean.env_steps == 96
    assert any("injected scoring crash at step 3" in m and "scoring again on fresh envs (1/2)" in m
               for m in log.messages), log.messages
    assert log.metrics[-1]["train/env_restarts"] == 1
    assert fitness_rows(log) == fitness_rows(clean_log)


def last_line(err: str) -> str:
    return err.replace("\r", "\n").strip().splitlines()[-1]


def test_scoring_env_failing_for_good_stops_and_says_what_is_kept(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Scoring envs that fail again and again stop the run as a training pool does: exit 1, and
    the last line names the checkpoint kept and the command that resumes it."""
    from tests.fault_envs import FaultEnv

    monkeypatch.setattr(FaultEnv, "main_steps", 0)
    run_dir = tmp_path / "r"
    # the first window's scoring takes 24 steps in this process (2 members x 2 episodes x 4
    # steps, the kept member's 2 episodes x 4): it passes and is checkpointed; then every step
    # raises, on fresh envs too
    code = main(["train", "--env", FAULT, "--run-dir", str(run_dir), "--steps", "200",
                 "--set", "env.kwargs.score_crash_from=30", "--set", "env.kwargs.horizon=4",
                 "--set", "env.pool=async", "--set", "env.workers=2",
                 "--set", "env.max_restarts=2", "--set", "env.num_envs=2",
                 "--set", "population.size=2", "--set", "evolution.evo_steps=32",
                 "--set", "eval.episodes=2", "--set", "eval.confirm_episodes=2",
                 "--set", "algo.hidden=[16]"])
    out, err = capsys.readouterr()
    assert code == 1 and "Traceback" not in out + err, err
    assert out.count("scoring again on fresh envs") == 2, out
    last, latest = last_line(err), run_dir / "checkpoints" / "latest.pt"
    assert "injected scoring crash" in last and "the env pool failed 3 times" in last, last
    assert last.endswith(f"The run's last checkpoint '{latest}' is kept: resume with evohpo "
                         f"train --resume {run_dir}"), last
    assert checkpoint.load(latest)[0]["generation"] == 1


def test_a_resumed_run_has_the_whole_restart_allowance(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A run stopped by env failures is resumed with env.max_restarts whole: the failures of the
    session before it do not count again."""
    run_dir = tmp_path / "r"
    # every env raises at its 40th step (80 env steps); windows of 64: a checkpoint at 128
    assert main(["train", "--env", FAULT, "--run-dir", str(run_dir), "--steps", "400",
                 "--set", "env.kwargs.crash_at=40", "--set", "env.kwargs.horizon=4",
                 "--set", "env.pool=async", "--set", "env.workers=2",
                 "--set", "env.max_restarts=1", "--set", "env.num_envs=2",
                 "--set", "population.size=2", "--set", "evolution.evo_steps=32",
                 "--set", "eval.episodes=2", "--set", "eval.confirm_episodes=0",
                 "--set", "algo.hidden=[16]"]) == 1
    first = capsys.readouterr().err
    assert "the env pool failed 2 times (env.max_restarts is 1)" in last_line(first), first
    assert checkpoint.load(run_dir / "checkpoints" / "latest.pt")[0]["env_steps"] == 128
    assert main(["train", "--resume", str(run_dir)]) == 1
    out, err = capsys.readouterr()
    # the resumed session survives its first failure, and stops at its second
    assert "restarting the env pool with fresh envs (1/1)" in out, out
    last = last_line(err)
    assert "the env pool failed 2 times (env.max_restarts is 1)" in last, last
    assert last.endswith(f"resume with evohpo train --resume {run_dir}"), last


def test_nan_observations_never_reach_the_buffer() -> None:
    t, log = run(fault_cfg("sync", nan_at=4))  # every env sends one NaN observation
    # each env's NaN observation spoils two transitions (as next_obs, then as obs): all kept out
    assert t.dropped == 4
    assert (np.isfinite(t.buffer.obs[: t.buffer.size]).all()
            and np.isfinite(t.buffer.next_obs[: t.buffer.size]).all())
    assert log.metrics[-1]["train/dropped_transitions"] == 4
    assert not any(m.diverged for m in t.members)


def test_agent_leaving_mid_episode_is_masked() -> None:
    t, log = run(fault_cfg("sync", drop_at=3))
    j = t.buffer.agents.index("picker")
    alive = t.buffer.alive[: t.buffer.size, j]
    assert 0 < alive.sum() < len(alive)  # the picker acted in some transitions, not all
    # where it did not act, its slots hold zeros, not garbage
    cols = t.buffer.obs_slices["picker"]
    assert np.all(t.buffer.obs[: t.buffer.size][alive == 0][:, cols] == 0)
    assert np.all(
        t.buffer.actions[: t.buffer.size][alive == 0][:, t.buffer.act_slices["picker"]] == 0)
    assert all(np.isfinite(v) for m in log.metrics for k, v in m.items()
               if k.endswith("critic_loss"))


def test_masked_agent_rows_do_not_train_its_critic() -> None:
    from evohpo.algos.buffer import ReplayBuffer
    from tests.test_algos import HP, fill, hetero_spec, switches

    spec = hetero_spec(False)
    from evohpo.algos import MATD3

    rng = np.random.default_rng(0)
    buf = ReplayBuffer(spec, 100)
    fill(buf, spec, 64, rng)
    buf.alive[:64, 1] = 0.0  # the listener acted in none of them
    m = MATD3(spec, HP, switches("maddpg"), [16], "relu", seed=0)
    before = [p.clone() for p in m.critics["listener"][0].parameters()]
    m.learn(buf.gather(np.arange(64)))
    assert all(torch.equal(a, b)
               for a, b in zip(before, m.critics["listener"][0].parameters(), strict=True))


# ----------------------------------------------------------------------------- numerical faults

class PoisonAfterFirstWindow(Trainer):
    """Sets chosen members' actor weights to NaN once, after the first generation."""

    def __init__(self, *a: Any, victims: tuple[int, ...] = (1,), **kw: Any) -> None:
        super().__init__(*a, **kw)
        self.victims, self.poisoned = victims, False

    def collect(self) -> None:
        if self.generation == 1 and not self.poisoned:
            for slot in self.victims:
                for p in self.members[slot].algo.actors["mover"].parameters():
                    p.data.fill_(float("nan"))
            self.poisoned = True
        super().collect()


def test_diverged_member_is_replaced_and_training_goes_on() -> None:
    cfg = C.load([TINY, {"steps": 128, "env": {"name": "tests.toy_envs:target_game"}}])
    log = Messages()
    t = PoisonAfterFirstWindow(cfg, log)
    try:
        t.train()
    finally:
        t.close()
    victim = [r for r in log.records if r["kind"] == "diverged"]
    assert len(victim) == 1 and victim[0]["generation"] == 1
    gen1 = log.metrics[1]
    assert (gen1[f"member/{victim[0]['member_id']}/fitness"] == -np.inf
            or gen1[f"member/{victim[0]['member_id']}/fitness"] is None)
    parents = {r["parent_id"] for r in log.records
               if r["generation"] == 1 and r["kind"] not in ("elite", "diverged")}
    assert victim[0]["member_id"] not in parents
    assert not any(m.diverged for m in t.members) and len(log.metrics) == 4
    assert np.isfinite(t.buffer.actions[: t.buffer.size]).all()


def test_every_member_diverged_stops_and_keeps_last_good_checkpoint(tmp_path: Path) -> None:
    cfg = C.load([TINY, {"steps": 128, "env": {"name": "tests.toy_envs:target_game"}}])
    t = PoisonAfterFirstWindow(cfg, Messages(), tmp_path, victims=(0, 1))
    with pytest.raises(Diverged, match="every member diverged by generation 1") as info:
        t.train()
    t.close()
    assert "checkpoints/latest.pt" in str(info.value)
    meta, tensors = checkpoint.load(tmp_path / "checkpoints" / "latest.pt")
    assert meta["generation"] == 1  # written at the end of generation 0, the last good one
    assert all(torch.isfinite(p).all() for st in tensors["members"]
               for sd in st["actors"].values() for p in sd.values())


# ----------------------------------------------------------------------------- resources

def test_buffer_too_big_for_memory(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr("evohpo.runtime.memory.available_memory", lambda: 50 * 2**20)
    err = cli_error(["train", "--run-dir", str(tmp_path / "r"), "--set", "buffer.capacity=2000000"],
                    capsys)
    assert "'buffer.capacity': 2,000,000 transitions need" in err and "lower buffer.capacity" in err


def test_buffer_check_counts_the_next_actions_a_team_run_keeps(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    from evohpo.algos.buffer import ReplayBuffer
    from evohpo.api import resolve
    from evohpo.envs import spec_for

    # the preset (teams, two frames) with critic targets from the next actions as played
    played_targets = "games.opponent_actions=played"
    cfg = resolve(algo="matd3", env="simple_adversary", overrides=[played_targets])[0]
    spec, cap = spec_for(cfg.env), 1_000_000
    plain, played = ReplayBuffer.bytes_for(spec, cap), ReplayBuffer.bytes_for(spec, cap, True)
    assert played > plain  # the next actions as played are a field of their own
    # memory for the transitions alone, not for the next actions a team run also keeps
    monkeypatch.setattr("evohpo.runtime.memory.available_memory", lambda: (plain + played) / 1.8)
    # a budget that can fill the memory: it is sized to what the budget can fill
    err = cli_error(["train", "--algo", "matd3", "--env", "simple_adversary", "--run-dir",
                     str(tmp_path / "r"), "--steps", str(2 * cap),
                     "--set", f"buffer.capacity={cap}", "--set", played_targets], capsys)
    assert "'buffer.capacity': 1,000,000 transitions need" in err
    assert not (tmp_path / "r").exists()


def test_full_disk_keeps_previous_checkpoint(monkeypatch: pytest.MonkeyPatch,
                                             tmp_path: Path) -> None:
    cfg = C.load([TINY, {"steps": 96}])
    real_save = torch.save
    calls = {"n": 0}

    def failing_save(obj: Any, f: Any, *a: Any, **k: Any) -> None:
        calls["n"] += 1
        if calls["n"] >= 3:  # the first checkpoints fit, then the disk is full
            raise OSError(errno.ENOSPC, "No space left on device")
        real_save(obj, f, *a, **k)

    monkeypatch.setattr(torch, "save", failing_save)
    t, log = run(cfg, tmp_path)
    assert t.env_steps == 96  # training went on
    assert any("No space left on device" in m and "previous checkpoint is intact" in m
               for m in log.messages)
    meta, _ = checkpoint.load(tmp_path / "checkpoints" / "latest.pt")
    assert meta["env_steps"] < 96
    assert not list((tmp_path / "checkpoints").glob(".*tmp*"))  # no half-written leftovers


def test_errors_are_typed() -> None:
    assert ConfigError.exit_code == 2 and EnvError.exit_code == 1
