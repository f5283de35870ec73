"""Checkpoints, resume, evaluation and export: a run survives anything and can be replayed."""

from __future__ import annotations

import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import time
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from evohpo import checkpoint
from evohpo.cli import main
from evohpo.playback import load as playback
from evohpo.runtime import evaluate as play
from tests.test_trainer import read_jsonl, strip_time

ARGS = ["--algo", "matd3", "--env", "simple_speaker_listener", "--quiet",
        "--set", "env.pool=sync", "--set", "env.num_envs=2", "--set", "population.size=2",
        "--set", "evolution.evo_steps=16", "--set", "evolution.learning_delay=0",
        "--set", "algo.batch_size=8", "--set", "algo.learn_step=4", "--set", "algo.hidden=[16]",
        "--set", "eval.episodes=2", "--set", "buffer.capacity=1000",
        "--set", "mutation.none=0", "--set", "mutation.weights=1"]


def train(run: Path, steps: int, *extra: str) -> int:
    return main(["train", *ARGS, "--steps", str(steps), "--run-dir", str(run), *extra])


def logs(run: Path) -> tuple[list[dict], list[dict]]:
    return strip_time(read_jsonl(run / "metrics.jsonl")), read_jsonl(run / "lineage.jsonl")


# the tournament, and the default (truncation) made to act every window: a copy over the worse
# member or, within the noise, exploring in place
STRATEGIES = {"tournament": ["--set", "evolution.strategy=tournament"],
              "truncation": ["--set", "evolution.ready=1", "--set", "evolution.quantile=0.5"]}


@pytest.mark.parametrize("strategy", list(STRATEGIES))
@pytest.mark.parametrize("first", [96, 80])  # stop at a window end, and mid-window
def test_resume_equals_uninterrupted(tmp_path: Path, first: int, strategy: str) -> None:
    extra = STRATEGIES[strategy]
    assert train(tmp_path / "full", 160, *extra) == 0
    assert train(tmp_path / "part", first, *extra) == 0
    assert main(["train", "--resume", str(tmp_path / "part"), "--steps", "160", "--quiet"]) == 0
    full, part = logs(tmp_path / "full"), logs(tmp_path / "part")
    assert part[0] == full[0] and part[1] == full[1]
    assert len(full[0]) == 5 and full[0][-1]["env_steps"] == 160
    if strategy == "truncation":  # PBT acted before the resume point and after it
        acted = [r["generation"] for r in full[1]
                 if any(n in (r.get("note") or "") for n in ("explores in place", "replaces"))]
        assert min(acted) < 2 and max(acted) >= 3, full[1]
    elapsed = [r["time/elapsed_s"] for r in read_jsonl(tmp_path / "part" / "metrics.jsonl")]
    assert elapsed == sorted(elapsed)  # the run's clock goes on across the resume


def test_resume_on_another_kind_of_machine_says_so(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """A run repeats exactly only where the arithmetic is the same: system.jsonl records the
    machine's kind, and a resume on another kind tells the user."""
    from evohpo.logs.loggers import machine_kind

    run = tmp_path / "r"
    assert train(run, 32) == 0
    lines = read_jsonl(run / "system.jsonl")
    assert [ln["machine"] for ln in lines] == [machine_kind()]
    assert main(["train", "--resume", str(run), "--steps", "48"]) == 0
    assert "need not match" not in capsys.readouterr().out  # the same kind: nothing to say
    other = "OtherVendor family 6 model 1 stepping 0, torch 2.13.0+cpu AVX2"
    with open(run / "system.jsonl", "a") as f:
        f.write(json.dumps({**lines[0], "machine": other}) + "\n")
    assert main(["train", "--resume", str(run), "--steps", "64"]) == 0
    out = capsys.readouterr().out
    assert f"trained before on {other}" in out and machine_kind() in out, out
    assert len(read_jsonl(run / "system.jsonl")) == 4  # one line per process that wrote


def test_ou_noise_state_survives_a_checkpoint(tmp_path: Path) -> None:
    """OU noise keeps a state per agent; a checkpoint gives it back as tensors."""
    ou = ("--set", "algo.noise=ou")
    assert train(tmp_path / "full", 96, *ou) == 0
    assert train(tmp_path / "part", 80, *ou) == 0
    assert main(["train", "--resume", str(tmp_path / "part"), "--steps", "96", "--quiet"]) == 0
    assert logs(tmp_path / "part") == logs(tmp_path / "full")
    import evohpo

    run = evohpo.load_run(tmp_path / "full")  # the best member, from best.pt
    best = run.member("best")
    assert best.algo.ou_state and all(isinstance(x, np.ndarray) and x.dtype == np.float32
                                      for x in best.algo.ou_state.values())
    assert np.isfinite(run.evaluate("best", episodes=2)["speaker_0"]).all()


def test_resume_refuses_other_config_and_spent_budget(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    assert train(tmp_path / "r", 64) == 0
    assert main(["train", "--resume", str(tmp_path / "r"), "--seed", "3"]) == 2
    assert "--seed cannot change" in capsys.readouterr().err
    assert main(["train", "--resume", str(tmp_path / "r")]) == 2
    assert "--steps" in capsys.readouterr().err


def test_sigint_checkpoints_and_resumes_exactly(tmp_path: Path) -> None:
    # long windows: few checkpoints, and the interrupt lands inside the second window
    longer = ["--set", "evolution.evo_steps=600"]
    assert train(tmp_path / "full", 3600, *longer) == 0
    run = tmp_path / "int"
    cmd = [sys.executable, "-m", "evohpo", "train", *ARGS, *longer, "--steps", "3600",
           "--run-dir", str(run)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=Path(__file__).parent.parent)
    deadline = time.time() + 60
    while not (run / "checkpoints" / "latest.pt").exists() and time.time() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    if proc.returncode == 0:
        pytest.skip("the run finished before the interrupt arrived")
    assert proc.returncode == 130, err
    assert "Traceback" not in err and f"evohpo train --resume {run}" in err
    meta, _ = checkpoint.load(run / "checkpoints" / "latest.pt")
    assert 0 < meta["env_steps"] < 3600
    assert main(["train", "--resume", str(run), "--quiet"]) == 0
    assert logs(run) == logs(tmp_path / "full")


WRITER = """
import sys, torch
from pathlib import Path
from evohpo import checkpoint
path, i = Path(sys.argv[1]), 0
while True:
    i += 1
    checkpoint.save(path, {"i": i}, {"x": torch.full((4_000_000,), float(i))})
    print(i, flush=True)
"""


def test_kill_9_mid_write_leaves_a_loadable_checkpoint(tmp_path: Path) -> None:
    path = tmp_path / "latest.pt"
    checkpoint.save(path, {"i": 0}, {"x": torch.zeros(4_000_000)})
    rng = np.random.default_rng(0)
    for _ in range(4):
        proc = subprocess.Popen([sys.executable, "-c", WRITER, str(path)], stdout=subprocess.PIPE,
                                text=True)
        assert proc.stdout is not None
        proc.stdout.readline()  # at least one complete write happened
        time.sleep(float(rng.uniform(0.0, 0.2)))  # then kill it somewhere inside a later write
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        meta, tensors = checkpoint.load(path)
        assert torch.all(tensors["x"] == float(meta["i"]))  # a whole checkpoint, never a torn one


def test_damaged_and_newer_checkpoints_are_clear_errors(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "r"
    assert train(run, 64) == 0
    latest = run / "checkpoints" / "latest.pt"
    data = latest.read_bytes()
    latest.write_bytes(data[: len(data) // 2])
    with pytest.raises(checkpoint.CheckpointError, match="damaged or truncated"):
        checkpoint.load(latest)
    assert main(["train", "--resume", str(run), "--steps", "100"]) == 2
    err = capsys.readouterr().err
    assert ("damaged or truncated" in err and "Traceback" not in err
            and len(err.strip().splitlines()) == 1)
    obj = {"format": checkpoint.FORMAT, "version": checkpoint.VERSION + 1, "meta": "{}",
           "tensors": {}}
    torch.save(obj, latest)
    with pytest.raises(checkpoint.CheckpointError, match="newer than this evohpo reads"):
        checkpoint.load(latest)
    latest.write_text("not a checkpoint")
    with pytest.raises(checkpoint.CheckpointError):
        checkpoint.load(latest)
    assert main(["eval", str(tmp_path / "nowhere")]) == 2


def spoil(path: Path, n: int, rng: np.random.Generator) -> str:
    """``n`` random bytes over the middle of the largest tensor stored in checkpoint ``path``
    (torch's reader checks the archive's structure, not the bytes of the data in it); returns
    the name of the damaged record."""
    with zipfile.ZipFile(path) as z:
        entry = max((e for e in z.infolist() if "/data/" in e.filename), key=lambda e: e.file_size)
    data = bytearray(path.read_bytes())
    names = struct.unpack("<HH", data[entry.header_offset + 26:entry.header_offset + 30])
    start = entry.header_offset + 30 + sum(names)  # past the record's local header
    assert entry.file_size >= 2 * n, entry.file_size
    mid = start + entry.file_size // 2 - n // 2
    data[mid:mid + n] = rng.bytes(n)
    path.write_bytes(data)
    return entry.filename


def test_random_bytes_in_latest_are_one_line_naming_the_previous_checkpoint(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """4 KB of random bytes in the middle of the replay memory stored in latest.pt: --resume
    refuses it in one line that names it and the previous checkpoint, which resumes."""
    run = tmp_path / "r"
    assert train(run, 400) == 0
    latest = run / "checkpoints" / "latest.pt"
    prev = run / "checkpoints" / "latest.prev.pt"
    spoil(latest, 4096, np.random.default_rng(0))
    assert main(["train", "--resume", str(run), "--steps", "480", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    before = checkpoint.load(prev)[0]  # the generation before the last
    assert before["env_steps"] < 400 and before["generation"] >= 1
    gen = next(r["generation"] for r in read_jsonl(run / "metrics.jsonl")  # as its line says
               if r["env_steps"] == before["env_steps"])
    assert (f"checkpoint '{latest}' is damaged or truncated and cannot be read (its content does "
            "not match the checksum written with it); the previous checkpoint "
            f"'{prev}' (generation {gen}, {before['env_steps']:,} env steps) "
            "is intact: copy it over latest.pt to go on from there") in err, err
    shutil.copy(prev, latest)  # what the line says to do
    assert main(["train", "--resume", str(run), "--steps", "480", "--quiet"]) == 0
    prev.unlink()
    spoil(latest, 4096, np.random.default_rng(1))
    assert main(["train", "--resume", str(run), "--steps", "560", "--quiet"]) == 2
    assert "no earlier checkpoint of it is kept" in capsys.readouterr().err


def test_random_bytes_in_best_are_one_line_for_eval_and_export(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "r"
    assert train(run, 400) == 0
    best = run / "checkpoints" / "best.pt"
    spoil(best, 1024, np.random.default_rng(0))
    for cmd in (["eval", str(run), "--episodes", "1"], ["export", str(run), "--out",
                                                        str(tmp_path / "out")]):
        assert main(cmd) == 2, cmd
        err = capsys.readouterr().err
        assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
        assert f"checkpoint '{best}' is damaged or truncated" in err and "checksum" in err, err
        assert "best.prev.pt" in err or "no earlier checkpoint of it is kept" in err, err


def test_a_checkpoint_without_a_checksum_still_loads(tmp_path: Path) -> None:
    """Checkpoints written before they carried a checksum load as they are."""
    path = tmp_path / "old.pt"
    torch.save({"format": checkpoint.FORMAT, "version": 1, "meta": json.dumps({"generation": 3}),
                "tensors": {"x": torch.arange(4.0)}}, path)
    meta, tensors = checkpoint.load(path)
    assert meta == {"generation": 3} and torch.equal(tensors["x"], torch.arange(4.0))


def test_an_unreadable_archive_is_named_in_whole_words(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """torch's reader fails on a record's damaged header with a long message: the line keeps its
    first sentence whole."""
    run = tmp_path / "r"
    assert train(run, 64) == 0
    latest = run / "checkpoints" / "latest.pt"
    with zipfile.ZipFile(latest) as z:
        entry = max((e for e in z.infolist() if "/data/" in e.filename), key=lambda e: e.file_size)
    data = bytearray(latest.read_bytes())
    data[entry.header_offset:entry.header_offset + 30] = np.random.default_rng(0).bytes(30)
    latest.write_bytes(data)
    assert main(["train", "--resume", str(run), "--steps", "100"]) == 2
    err = capsys.readouterr().err
    assert "invalid header or archive is corrupted)" in err, err
    assert "miniz" not in err and "If yo" not in err


# a run whose budget ends inside its first window (of 32 env steps here), resumed with more
BEFORE_FIRST_GENERATION = {
    "matd3": (ARGS, 8, 96),
    "mappo": (["--algo", "mappo", "--env", "simple_spread", "--quiet", "--set", "env.pool=sync",
               "--set", "env.backend=batched", "--set", "env.num_envs=8",
               "--set", "population.size=2", "--set", "evolution.evo_steps=24",
               "--set", "evolution.learning_delay=0", "--set", "algo.hidden=[16]",
               "--set", "algo.rollout=4", "--set", "algo.epochs=1", "--set", "eval.episodes=2",
               "--set", "mutation.none=0", "--set", "mutation.hyperparameters=1"], 32, 192),
}


@pytest.mark.parametrize("algo", list(BEFORE_FIRST_GENERATION))
def test_resume_before_the_first_generation_keeps_every_lineage_record(
        tmp_path: Path, algo: str) -> None:
    """The first generation's birth records are written when its window ends: a run stopped
    before that and resumed writes them as the run that never stopped does."""
    args, first, steps = BEFORE_FIRST_GENERATION[algo]
    for run, budget in (("full", steps), ("part", first)):
        assert main(["train", *args, "--steps", str(budget), "--run-dir",
                     str(tmp_path / run)]) == 0
    assert checkpoint.load(tmp_path / "part" / "checkpoints" / "latest.pt")[0]["generation"] == 0
    assert main(["train", "--resume", str(tmp_path / "part"), "--steps", str(steps),
                 "--quiet"]) == 0
    full, part = logs(tmp_path / "full"), logs(tmp_path / "part")
    assert [r["member_id"] for r in full[1] if r["kind"] == "birth"] == [0, 1]
    assert any(r["kind"] != "birth" for r in full[1])  # evolution acted after the resume point
    assert part == full


@pytest.mark.parametrize("continuous", [True, False])
def test_eval_reproduces_trainer_fitness_and_export_acts_identically(
        tmp_path: Path, continuous: bool, capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "r"
    # on the CPU, as eval plays: bit for bit holds on one device (a GPU's arithmetic differs
    # in the last bits; a GPU member loaded on a CPU: test_mutations_on_cuda, where a GPU is)
    assert train(run, 96, "--set", f"env.kwargs.continuous_actions={str(continuous).lower()}",
                 "--set", "device=cpu") == 0
    meta, _ = checkpoint.load(run / "checkpoints" / "best.pt")
    best = meta["member"]
    cfg, spec, algo, _ = playback.load_member(run, "best")
    returns = play.play(cfg, algo, spec, best["episodes"], best["eval_seed"])
    for a in spec.agents:
        assert returns[a].mean() == pytest.approx(best["per_agent"][a], abs=1e-9)
    assert sum(returns[a].mean() for a in spec.agents) == pytest.approx(best["fitness"], abs=1e-9)
    assert main(["eval", str(run), "--seed", str(best["eval_seed"])]) == 0
    assert f"{best['fitness']:9.3f}" in capsys.readouterr().out
    # a member by id, from the latest checkpoint
    latest_meta, _ = checkpoint.load(run / "checkpoints" / "latest.pt")
    assert main(["eval", str(run), "--member", str(latest_meta["members"][-1]["id"]),
                 "--episodes", "1"]) == 0
    assert main(["eval", str(run), "--member", "12345"]) == 2
    # render: one frame per step plus the first
    gif = tmp_path / "ep.gif"
    assert main(["eval", str(run), "--render", str(gif)]) == 0
    from PIL import Image

    with Image.open(gif) as im:
        assert im.n_frames == 25 + 1
    # export: runs with torch alone and acts like the member's deterministic policy
    assert_export_acts_like(run, tmp_path / "export", spec, algo)


def assert_export_acts_like(run: Path, out: Path, spec: Any, algo: Any) -> None:
    """`evohpo export` of ``run`` into ``out`` gives actors that, with torch alone, act as
    ``algo``'s deterministic policy does."""
    assert main(["export", str(run), "--out", str(out)]) == 0
    note = json.loads((out / "spaces.json").read_text())
    rng = np.random.default_rng(0)
    obs = {a: rng.normal(size=(5, spec[a].obs_dim)).astype(np.float32) for a in spec.agents}
    expected, _ = algo.act(obs, None)
    for a in spec.agents:
        policy = torch.export.load(out / note["agents"][a]["file"]).module()
        got = policy(torch.from_numpy(obs[a])).numpy()
        if spec[a].discrete:
            np.testing.assert_array_equal(got, expected[a][:, 0].astype(np.int64))
        else:
            np.testing.assert_allclose(got, expected[a], atol=1e-6)
