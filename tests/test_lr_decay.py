"""algo.lr_decay: every member's learning rates fall linearly over the end of the run, on the
optimizers the members actually step, through mutation and resume."""

from __future__ import annotations

from pathlib import Path

import pytest

import evohpo
from evohpo import api
from evohpo.cli import main
from evohpo.logs.loggers import JsonlLogger
from evohpo.loop.trainer import Trainer
from evohpo.runtime import lr_factor
from tests.test_api import TINY as API_TINY
from tests.test_trainer import read_jsonl, strip_time, tiny

DECAY = {"algo": {"lr_decay": 0.1, "lr_decay_start": 0.25}}


def test_the_factor_is_one_then_falls_linearly_to_lr_decay() -> None:
    cfg = tiny(steps=1000, **DECAY)  # falls from 250 env steps to 0.1 at 1000
    assert [lr_factor(cfg, s) for s in (0, 100, 250)] == [1.0, 1.0, 1.0]
    assert lr_factor(cfg, 625) == pytest.approx(0.55)
    assert lr_factor(cfg, 1000) == pytest.approx(0.1)
    assert lr_factor(cfg, 5000) == pytest.approx(0.1)  # past the budget it stays at its end
    assert all(lr_factor(tiny(steps=1000), s) == 1.0 for s in (0, 500, 1000))  # the default
    never = tiny(steps=1000, algo={"lr_decay": 0.1, "lr_decay_start": 1.0})
    assert all(lr_factor(never, s) == 1.0 for s in (0, 999, 1000))


def test_members_learn_at_the_decayed_rates_and_the_metrics_say_so(tmp_path: Path) -> None:
    cfg = tiny(steps=96, **DECAY)  # windows start at 0, 32 and 64 env steps
    log = JsonlLogger(tmp_path)
    t = Trainer(cfg, log)
    seen: list[tuple[float, float]] = []  # (actor lr in the optimizer, hp.lr_actor) at a step
    algo_cls = type(t.members[0].algo)
    learn = algo_cls.learn

    def spy(self, batch):  # type: ignore[no-untyped-def]
        opt = next(iter(self.actor_opts.values()))
        seen.append((opt.param_groups[0]["lr"], self.hp.lr_actor))
        return learn(self, batch)

    algo_cls.learn = spy  # type: ignore[method-assign]
    try:
        t.train()
    finally:
        algo_cls.learn = learn  # type: ignore[method-assign]
        t.close()
        log.close()
    factors = [lr_factor(cfg, s) for s in (0, 32, 64)]
    assert factors == [1.0, pytest.approx(0.9), pytest.approx(0.5)]
    metrics = read_jsonl(tmp_path / "metrics.jsonl")
    assert [m["train/lr_factor"] for m in metrics] == factors
    ratios = {round(lr / own, 6) for lr, own in seen}
    assert ratios == {1.0, 0.9, 0.5}, ratios  # every window's steps at its own factor
    for m in t.members:  # mutation changes a member's own rate; the factor stays on top
        m.algo.set_hyperparams(lr_actor=2e-3, lr_critic=4e-3)
        assert [g["lr"] for o in m.algo.actor_opts.values() for g in o.param_groups] \
            == pytest.approx([2e-3 * 0.5] * len(m.algo.actor_opts))
        assert [g["lr"] for o in m.algo.critic_opts.values() for g in o.param_groups] \
            == pytest.approx([4e-3 * 0.5] * len(m.algo.critic_opts))


def test_without_decay_no_factor_is_logged_and_with_it_learning_changes(tmp_path: Path) -> None:
    def run(d: str, over: dict) -> list[dict]:
        assert main(["train", "--algo", "matd3", "--env", "simple_speaker_listener", "--quiet",
                     "--steps", "96", "--run-dir", str(tmp_path / d),
                     *(x for k, v in over.items() for x in ("--set", f"{k}={v}")),
                     *(x for k, v in {"env.pool": "sync", "env.num_envs": 2,
                                      "population.size": 2, "evolution.evo_steps": 16,
                                      "evolution.learning_delay": 0, "algo.batch_size": 8,
                                      "algo.learn_step": 4, "algo.hidden": "[16]",
                                      "eval.episodes": 2, "buffer.capacity": 1000}.items()
                       for x in ("--set", f"{k}={v}"))]) == 0
        return strip_time(read_jsonl(tmp_path / d / "metrics.jsonl"))

    plain, decayed = run("plain", {}), run("decay", {"algo.lr_decay": 0.1})
    assert all("train/lr_factor" not in m for m in plain)
    assert [m["train/lr_factor"] for m in decayed] == [1.0, 1.0, pytest.approx(1 - 0.9 * 16 / 48)]
    assert plain[:2] == [{k: v for k, v in m.items() if k != "train/lr_factor"}
                         for m in decayed[:2]]  # the same run until the rates fall
    assert plain[2] != {k: v for k, v in decayed[2].items() if k != "train/lr_factor"}


def test_a_stopped_run_with_decay_resumes_exactly(tmp_path: Path) -> None:
    over = {"algo.lr_decay": 0.2, "algo.lr_decay_start": 0.0}
    evohpo.train(API_TINY, run_dir=tmp_path / "full", overrides=over)

    def stop_at_one(gen: api.GenerationInfo) -> bool:
        return gen.generation == 1

    evohpo.train(API_TINY, run_dir=tmp_path / "part", overrides=over, callbacks=[stop_at_one])
    evohpo.resume(tmp_path / "part")
    full, part = (strip_time(read_jsonl(tmp_path / d / "metrics.jsonl")) for d in ("full", "part"))
    assert len(full) == 3 and part == full
    assert read_jsonl(tmp_path / "part" / "lineage.jsonl") \
        == read_jsonl(tmp_path / "full" / "lineage.jsonl")


@pytest.mark.parametrize(("key", "value", "allowed"), [("algo.lr_decay", "0", "(0, 1]"),
                                                       ("algo.lr_decay", "1.5", "(0, 1]"),
                                                       ("algo.lr_decay_start", "-0.1", "[0, 1]")])
def test_out_of_range_decay_is_a_clear_error(key: str, value: str, allowed: str,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["train", "--env", "simple_spread", "--steps", "10", "--set",
                 f"{key}={value}"]) == 2
    err = capsys.readouterr().err
    assert key in err and allowed in err and "Traceback" not in err
