"""The population on Ray: a local Ray instance (2 CPUs) runs the same configs as the local trainer.

With one actor a Ray run repeats a local run exactly; with two, it repeats it exactly as long as
nobody learns (learning then differs only by when the other actor's experience arrives). A Ray
run leaves the same files and keys as a local one, its checkpoints resume on either backend,
a killed actor is recreated and the run goes on, and a sweep runs its jobs as parallel tasks.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

ray = pytest.importorskip("ray")

from evohpo import checkpoint  # noqa: E402
from evohpo import config as C  # noqa: E402
from evohpo.cli import main  # noqa: E402
from evohpo.logs.loggers import JsonlLogger  # noqa: E402
from evohpo.loop.trainer import Trainer  # noqa: E402
from evohpo.runtime.local import LocalRuntime  # noqa: E402
from evohpo.runtime.phases import DRIVER_PHASES  # noqa: E402
from evohpo.runtime.ray import ActorLost  # noqa: E402
from evohpo.runtime.ray.driver import RayRuntime  # noqa: E402
from tests.test_trainer import TINY, read_jsonl, strip_time  # noqa: E402


@pytest.fixture(scope="module", autouse=True)
def local_ray() -> Any:
    ray.init(num_cpus=2, include_dashboard=False, logging_level="warning", log_to_driver=False)
    yield
    ray.shutdown()


def ray_cfg(actors: int, **over: Any) -> C.Config:
    return C.load([TINY, {"steps": 96, "distributed": {"backend": "ray", "num_actors": actors}},
                   over])


def run(runtime: type, cfg: C.Config, d: Path) -> tuple[dict[str, Any], list[dict], list[dict]]:
    d.mkdir(parents=True, exist_ok=True)
    log = JsonlLogger(d)
    t = Trainer(cfg, log, d, runtime)
    try:
        summary = t.train()
    finally:
        t.close()
        log.close()
    return summary, read_jsonl(d / "metrics.jsonl"), read_jsonl(d / "lineage.jsonl")


# in place: PBT whose bottom member explores its own hyperparameters every window (same id, so
# the actor must be sent the change by the member's identity, not its id)
IN_PLACE = {"evolution": {"strategy": "truncation", "ready": 1, "min_gap": 1000.0,
                          "explore_kept": True}}


# a game of two teams, each agent seeing its last two observations (env.frames)
FRAMED = {"env": {"name": "simple_adversary", "kwargs": {"continuous_actions": True},
                  "frames": 2}}


@pytest.mark.parametrize("over", [{}, IN_PLACE, FRAMED],
                         ids=["tournament", "in_place", "framed"])
def test_one_actor_repeats_a_local_run_exactly(tmp_path: Path, over: dict[str, Any]) -> None:
    cfg = ray_cfg(1, **over)
    _, m_local, l_local = run(LocalRuntime, cfg, tmp_path / "local")
    summary, m_ray, l_ray = run(RayRuntime, cfg, tmp_path / "ray")
    assert summary["actors"] == 1 and any(k.endswith("critic_loss")
                                          for k in m_ray[-1])  # members learned
    assert strip_time(m_ray) == strip_time(m_local) and l_ray == l_local
    assert any("explores in place" in r["note"] for r in l_local) == (over is IN_PLACE)


@pytest.mark.parametrize("actors", [1, 2])
def test_on_policy_members_on_ray_repeat_the_local_run_exactly(tmp_path: Path,
                                                               actors: int) -> None:
    """MAPPO members learn from their own rollouts only, so even with two actors (nothing to
    share) the run is the local one; windows of 16 steps against rollouts of 3 end with a short
    rollout, learned in the actors at the window's end."""
    cfg = ray_cfg(actors, algo={"name": "mappo", "rollout": 3, "hidden": [16]})
    _, m_local, l_local = run(LocalRuntime, cfg, tmp_path / "local")
    summary, m_ray, l_ray = run(RayRuntime, cfg, tmp_path / "ray")
    assert summary["actors"] == actors and summary["shared_bytes"] == 0
    assert any(k.endswith("critic_loss") for k in m_ray[-1])
    assert strip_time(m_ray) == strip_time(m_local) and l_ray == l_local


def test_two_actors_repeat_a_local_run_exactly_until_learning(tmp_path: Path) -> None:
    # the slots, env seeds, evaluation and evolution line up with the local run's; only learning
    # differs (an actor sees the other's experience at the window's end)
    cfg = ray_cfg(2, evolution={"learning_delay": 10_000})
    _, m_local, l_local = run(LocalRuntime, cfg, tmp_path / "local")
    summary, m_ray, l_ray = run(RayRuntime, cfg, tmp_path / "ray")
    # every row, to the other actor
    assert summary["actors"] == 2 and summary["shared_bytes"] == 96 * 168
    assert strip_time(m_ray) == strip_time(m_local) and l_ray == l_local


@pytest.mark.parametrize(("actors", "past", "over"), [
    (1, False, {}), (2, False, {}), (2, True, {}),
])
def test_a_team_run_on_ray_repeats_the_local_run(tmp_path: Path, actors: int,
                                                 past: bool, over: dict[str, Any]) -> None:
    # two actors: each holds one slot, i.e. one member of each team, which move between the
    # actors as the pairing rotates every window; nobody learns, so the runs must agree exactly.
    # past: half of some slots' envs play the scripted heuristic, which each actor builds for
    # itself
    from tests.test_competitive import MIXED, TAG

    cfg = C.load([TINY, TAG, {"steps": 96, "distributed": {"backend": "ray",
                                                           "num_actors": actors}},
                  {"evolution": {"learning_delay": 10_000}} if actors == 2 else {},
                  {**MIXED, "steps": 192} if past else {}, over])
    _, m_local, l_local = run(LocalRuntime, cfg, tmp_path / "local")
    summary, m_ray, l_ray = run(RayRuntime, cfg, tmp_path / "ray")
    assert summary["actors"] == actors and "team/good/best_fitness" in m_ray[-1]
    assert strip_time(m_ray) == strip_time(m_local) and l_ray == l_local
    league = read_jsonl(tmp_path / "local" / "league.jsonl")
    assert read_jsonl(tmp_path / "ray" / "league.jsonl") == league
    assert any(r.get("past_opponents") for r in league) == past
    assert ("team/good/kept_generation" in m_ray[-1]) == ("eval" in over)


def keys(rows: list[dict]) -> list[set[str]]:
    """Each row's keys, apart from the phases of its time (the driver times its own)."""
    return [{re.sub(r"^member/\d+/", "member/*/", k) for k in r
             if not k.startswith("time/phase/")} for r in rows]


def test_ray_run_leaves_the_files_and_keys_of_a_local_run_and_resumes_on_either(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["train", "--config", str(tmp_path / "tiny.yaml"), "--steps", "64", "--quiet"]
    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(TINY))
    assert main([*args, "--run-dir", str(tmp_path / "local")]) == 0
    assert main([*args, "--run-dir", str(tmp_path / "ray"), "--backend", "ray"]) == 0
    assert "done: 2 generations, 64 env steps" in capsys.readouterr().out
    local, ray_dir = tmp_path / "local", tmp_path / "ray"
    files = sorted(str(p.relative_to(local)) for p in local.rglob("*"))
    assert files == sorted(str(p.relative_to(ray_dir)) for p in ray_dir.rglob("*"))
    for name in ("metrics.jsonl", "lineage.jsonl"):
        assert keys(read_jsonl(ray_dir / name)) == keys(read_jsonl(local / name))
    # the driver's phases: the actors' windows are its collect phase, sharing their rows its store
    for row in read_jsonl(ray_dir / "metrics.jsonl"):
        timed = {k[len("time/phase/"):-2] for k in row if k.startswith("time/phase/")}
        assert timed == {*DRIVER_PHASES, "other"} and row["time/phase/collect_s"] > 0
        assert sum(row[f"time/phase/{p}_s"] for p in timed) == pytest.approx(
            row["time/window_s"], abs=1e-5)
    assert C.read_yaml(ray_dir / "config.yaml")["distributed"]["backend"] == "ray"
    for ckpt in ("latest.pt", "best.pt"):
        (ml, tl), (mr, tr) = (checkpoint.load(d / "checkpoints" / ckpt) for d in (local, ray_dir))
        assert set(ml) == set(mr) and set(tl) == set(tr)
    _, tensors = checkpoint.load(ray_dir / "checkpoints" / "latest.pt")
    # both actors' envs; every row
    assert len(tensors["pool"]) == 2 and tensors["buffer"]["size"] == 64
    # a Ray checkpoint resumes locally, and a local one on Ray
    assert main(["train", "--resume", str(ray_dir), "--steps", "96", "--quiet",
                 "--backend", "local"]) == 0
    assert main(["train", "--resume", str(local), "--steps", "96", "--quiet",
                 "--backend", "ray"]) == 0
    for d in (local, ray_dir):
        assert [m["env_steps"] for m in read_jsonl(d / "metrics.jsonl")] == [32, 64, 96]


class KillsAnActor(RayRuntime):
    """Kills actor 1 while it runs generation 1's window (the test hook)."""

    killed = False

    def dispatch(self, n: int, env_steps: int) -> list[Any]:
        calls = super().dispatch(n, env_steps)
        if self.generation == 1 and not self.killed:
            self.killed = True
            time.sleep(0.05)
            ray.kill(self.actors[1], no_restart=True)
        return calls


def kill_and_wait(actor: Any) -> None:
    """ray.kill returns at once; the actor dies a moment later."""
    ray.kill(actor, no_restart=True)
    for _ in range(100):
        try:
            ray.get(actor.info.remote())
        except ray.exceptions.RayActorError:
            return
        time.sleep(0.1)
    raise AssertionError("the killed actor still answers")


def test_a_killed_actor_is_recreated_and_the_run_goes_on(tmp_path: Path) -> None:
    log = JsonlLogger(tmp_path)
    trainer = Trainer(ray_cfg(2, steps=128), log, tmp_path, KillsAnActor)
    t = trainer.runtime
    try:
        summary = trainer.train()
        assert summary["actor_restarts"] == 1
        metrics, lineage = (read_jsonl(tmp_path / "metrics.jsonl"),
                            read_jsonl(tmp_path / "lineage.jsonl"))
        assert [m["env_steps"] for m in metrics] == [32, 64, 96, 128]
        restored = [r for r in lineage if r["kind"] == "restored"]
        assert (len(restored) == 1 and restored[0]["generation"] == 1
                and restored[0]["op"] == "actor 1")
        # the recreated actor got the shared replay copy back from the live one
        sizes = ray.get([a.load_buffer.remote(a.buffer_state.remote()) for a in t.actors])
        assert sizes[0] == sizes[1] > 0
        meta, _ = checkpoint.load(tmp_path / "checkpoints" / "latest.pt")
        assert meta["env_steps"] == 128
        # a loss beyond distributed.max_actor_restarts stops the run with one clear line
        t.cfg = C.load([C.to_dict(t.cfg), {"distributed": {"max_actor_restarts": 1}}])
        kill_and_wait(t.actors[0])
        with pytest.raises(ActorLost,
                           match=r"2 actors lost \(distributed.max_actor_restarts is 1\)"):
            t.call_all("info")
    finally:
        t.close()
        log.close()


def test_sweep_runs_its_jobs_as_parallel_ray_tasks(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "base.yaml").write_text(yaml.safe_dump(TINY))
    spec = {"name": "tiny", "base": "base.yaml", "steps": 32, "seeds": [0, 1]}
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(spec))
    out = tmp_path / "out"
    assert main(["sweep", str(tmp_path / "s.yaml"), "--out-dir", str(out), "--quiet",
                 "--backend", "ray"]) == 0
    results = read_jsonl(out / "results.jsonl")
    assert (sorted(r["job"] for r in results) == ["default-s0", "default-s1"]
            and all(r["rc"] == 0 for r in results))
    for r in results:
        assert [m["env_steps"] for m in read_jsonl(Path(r["run_dir"]) / "metrics.jsonl")] == [32]
    assert (out / "report.html").is_file()
    # a rerun finds every job done, whichever backend ran it
    assert main(["sweep", str(tmp_path / "s.yaml"), "--out-dir", str(out), "--quiet"]) == 0
    assert [r["state"] for r in read_jsonl(out / "results.jsonl")[2:]] == ["done", "done"]
    # and says so, as --dry-run does, on either backend (tasks report in the order they end)
    capsys.readouterr()
    assert main(["sweep", str(tmp_path / "s.yaml"), "--out-dir", str(out), "--quiet",
                 "--backend", "ray"]) == 0
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("[")]
    assert sorted(ln.split("] ", 1)[1] for ln in lines) == [
        f"default-s{s}: done, skipped -> {out / f'default-s{s}'}" for s in (0, 1)]


def test_an_address_where_nothing_listens_is_refused_at_once(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "run"
    assert main(["train", "--steps", "32", "--run-dir", str(run),
                 "--ray-address", "127.0.0.1:1"]) == 2
    err = capsys.readouterr().err
    assert "'distributed.address': nothing answers at '127.0.0.1:1'" in err and not run.exists()
