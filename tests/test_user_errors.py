"""What a user can get wrong on the command line, and the one line each gets back: output paths
that cannot be written, numbers out of range, env kwargs the env does not take, run directories
that cannot be resumed."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from PIL import Image

from evohpo import checkpoint
from evohpo.cli import build_parser, main
from tests.mounts import read_only
from tests.test_checkpoint import ARGS, train
from tests.test_sweep import sweep_file
from tests.toy_envs import TargetGame


def typed_target(horizon: int = 1, continuous_picker: bool = False) -> TargetGame:
    """A factory with a signature (the toy one takes **kwargs): its kwargs can be checked."""
    return TargetGame(horizon=horizon, continuous_picker=continuous_picker)


TYPED = "tests.test_user_errors:typed_target"


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = tmp_path_factory.mktemp("trained") / "r"
    assert train(run, 64) == 0
    return run


@pytest.fixture
def run(trained: Path, tmp_path: Path) -> Path:
    """A copy of the trained run, for a test to spoil."""
    return Path(shutil.copytree(trained, tmp_path / "run"))


def files_of(run: Path, leave_out: tuple[str, ...] = ()) -> dict[str, bytes]:
    """Every file of a run directory, byte for byte (but those under ``leave_out``)."""
    return {str(p.relative_to(run)): p.read_bytes() for p in sorted(run.rglob("*"))
            if p.is_file() and not str(p.relative_to(run)).startswith(leave_out)}


def one_line(args: list[str], capsys: pytest.CaptureFixture[str], *names: str) -> str:
    """The command fails with exit code 2 and one line naming each of ``names``."""
    try:
        code = main(args)
    except SystemExit as e:  # argparse's errors exit from the parser
        code = e.code  # type: ignore[assignment]
    assert code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    for name in names:
        assert name in err, err
    return err


# ----------------------------------------------------------------------------- output paths


@pytest.mark.parametrize("out", ["/proc/evohpo-policies", "/sys/evohpo-policies", "FILE"])
def test_export_to_a_path_that_cannot_be_written(
    run: Path, tmp_path: Path, out: str, capsys: pytest.CaptureFixture[str]
) -> None:
    if out == "FILE":
        out = str(tmp_path / "a-file")
        Path(out).write_text("")
    err = one_line(["export", str(run), "--out", out], capsys, f"--out {out!r}")
    assert (
        ("is a file, not a directory" in err) if out.endswith("a-file") else ("cannot write" in err)
    )


def test_render_path_is_checked_before_the_episode_plays(
    run: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def never(*a: Any, **k: Any) -> None:
        raise AssertionError("the episode played before the path was checked")

    monkeypatch.setattr("evohpo.playback.load.make_render_env", never)
    one_line(
        ["eval", str(run), "--render", "/proc/evohpo.gif"],
        capsys,
        "--render '/proc/evohpo.gif'",
        "cannot write",
    )
    one_line(["eval", str(run), "--render", str(run)], capsys, "is a directory")


def test_read_only_run_directory(run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with read_only(run):
        one_line(
            ["train", "--resume", str(run), "--steps", "128", "--quiet"],
            capsys,
            f"'{run}'",
            "cannot write",
        )
        one_line(["report", str(run)], capsys, f"'{run / 'report.html'}'", "cannot write")
        one_line(
            ["export", str(run), "--out", str(run / "policies")],
            capsys,
            f"'{run / 'policies'}'",
            "cannot write",
        )
    assert main(["report", str(run), "--out", str(run.parent / "elsewhere.html")]) == 0


def test_gif_caption_has_a_band_of_its_own(run: Path, tmp_path: Path) -> None:
    """The step counter sits above the scene, never over an agent or the env's own text."""
    from evohpo.envs import make_env
    from evohpo.playback import load as playback
    from evohpo.playback.animation import BAND
    from evohpo.runtime.evaluate import scoring_seeds

    gif = tmp_path / "ep.gif"
    assert main(["eval", str(run), "--render", str(gif), "--seed", "0"]) == 0
    cfg = playback.run_config(run)
    env = make_env(cfg.env.name, {**cfg.env.kwargs, "render_mode": "rgb_array"})
    env.reset(seed=scoring_seeds(0, 1)[0])  # the first episode eval scores for seed 0
    scene = np.asarray(env.render(), int)
    env.close()
    with Image.open(gif) as im:
        first = np.asarray(im.convert("RGB"), int)
    assert first.shape == (scene.shape[0] + BAND, scene.shape[1], 3)
    assert (
        np.abs(first[BAND:] - scene).mean() < 2
    )  # the scene as the env drew it (GIF palette aside)
    assert (first[:BAND] < 128).any()  # the counter is in the band


# ----------------------------------------------------------------------------- numbers


@pytest.mark.parametrize(
    ("flag", "value", "says"),
    [
        ("--episodes", "0", "0 is out of range; allowed [1, inf]"),
        ("--episodes", "-3", "-3 is out of range"),
        ("--episodes", "2.5", "'2.5' is not a whole number"),
        ("--seed", "-1", "-1 is out of range; allowed [0, inf]"),
    ],
)
def test_eval_numbers_are_checked(
    trained: Path, flag: str, value: str, says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    one_line(["eval", str(trained), flag, value], capsys, f"argument {flag}: {says}")


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["train", "--steps", "0"], "argument --steps: 0 is out of range"),
        (["train", "--steps", "1e6.5"], "argument --steps: '1e6.5' is not a whole number"),
        (["train", "--steps", "2.5e0"], "argument --steps: '2.5e0' is not a whole number"),
        (["train", "--seed", "-2"], "argument --seed: -2 is out of range"),
        (["sweep", "x.yaml", "--steps", "-5"], "argument --steps: -5 is out of range"),
    ],
)
def test_train_and_sweep_numbers_are_checked(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    one_line(argv, capsys, says)


def test_steps_in_scientific_notation() -> None:
    p = build_parser()
    assert p.parse_args(["train", "--steps", "1e6"]).steps == 1_000_000
    assert p.parse_args(["train", "--steps", "2.5e5"]).steps == 250_000
    assert p.parse_args(["sweep", "x.yaml", "--steps", "1_000"]).steps == 1000


def test_eval_runs_the_episodes_asked_for(
    trained: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["eval", str(trained), "--episodes", "1"]) == 0
    assert ": 1 episode, seed " in capsys.readouterr().out


# ----------------------------------------------------------------------------- env kwargs


@pytest.mark.parametrize(
    ("env", "setting", "says"),
    [
        (
            "simple_speaker_listener",
            "continuous_actions=maybe",
            "'env.kwargs.continuous_actions': 'maybe' is not bool",
        ),
        (
            "simple_speaker_listener",
            "continuous_actions=1",
            "'env.kwargs.continuous_actions': 1 is not bool",
        ),
        ("simple_speaker_listener", "max_cycles=2.5", "'env.kwargs.max_cycles': 2.5 is not int"),
        ("simple_speaker_listener", "max_cycles=true", "'env.kwargs.max_cycles': True is not int"),
        ("simple_spread", "local_ratio=high", "'env.kwargs.local_ratio': 'high' is not float"),
        ("simple_spread", "num_agent_neighbors=x", "'x' is not int or null"),
        (
            "simple_speaker_listener",
            "max_cycels=10",
            "takes no argument 'max_cycels' (did you mean: max_cycles",
        ),
        (TYPED, "horizon=soon", "'env.kwargs.horizon': 'soon' is not int"),
        (
            TYPED,
            "speed=2",
            "takes no argument 'speed'; it takes: horizon=1, continuous_picker=False",
        ),
    ],
)
def test_env_kwargs_are_checked_against_the_factory(
    env: str, setting: str, says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    one_line(
        [
            "train",
            "--env",
            env,
            "--set",
            f"env.kwargs.{setting}",
            "--run-dir",
            str(tmp_path / "r"),
            "--steps",
            "32",
            "--quiet",
        ],
        capsys,
        "config key",
        says,
    )
    assert not (tmp_path / "r").exists()


def test_good_env_kwargs_pass() -> None:
    from evohpo.envs import probe

    assert probe("simple_spread", {"N": 2, "local_ratio": 1, "num_agent_neighbors": None}).agents
    assert not probe("simple_speaker_listener", {"continuous_actions": True})["listener_0"].discrete
    assert probe(TYPED, {"horizon": 3}).agents == ("mover", "picker")


@pytest.mark.parametrize("env", ["tests.toy_envs:target_game", TYPED])
def test_render_of_an_env_without_render_mode(
    env: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "r"
    assert main(["train", *ARGS, "--env", env, "--steps", "32", "--run-dir", str(run)]) == 0
    one_line(
        ["eval", str(run), "--render", str(tmp_path / "ep.gif")],
        capsys,
        f"env {env!r} cannot render",
    )


# ----------------------------------------------------------------------------- run directories


NO_CUDA = pytest.mark.skipif(torch.cuda.is_available(), reason="a machine without CUDA")


@NO_CUDA
def test_a_gpu_that_is_not_here_leaves_no_run_directory(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--set device=cuda without CUDA: one line, and no run directory left behind, so the same
    command gives the same line again (not 'already exists')."""
    args = ["train", *ARGS, "--steps", "32", "--run-dir", str(tmp_path / "r"),
            "--set", "device=cuda"]
    for _ in range(2):
        one_line(args, capsys, "config key 'device': 'cuda' asked for, but no CUDA device")
        assert not (tmp_path / "r").exists()


@NO_CUDA
def test_an_error_found_as_the_run_is_built_removes_what_the_start_made(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the check made before the run directory appears, the device is refused as the
    runtime is built: what the start wrote goes (a user's own file stays)."""
    monkeypatch.setattr("evohpo.devices.resolve_device", lambda cfg: torch.device("cpu"))
    run = tmp_path / "r"
    args = ["train", *ARGS, "--steps", "32", "--run-dir", str(run), "--set", "device=cuda"]
    one_line(args, capsys, "no CUDA device is available")
    assert not run.exists()
    run.mkdir()
    (run / "notes.txt").write_text("mine")
    one_line([*args, "--overwrite"], capsys, "no CUDA device is available")
    assert [p.name for p in run.iterdir()] == ["notes.txt"]


def test_config_that_is_a_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    one_line(
        ["train", "--config", str(tmp_path)], capsys, f"config file '{tmp_path}' is a directory"
    )


def test_resume_of_an_empty_checkpoint(run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (run / "checkpoints" / "latest.pt").write_bytes(b"")
    one_line(
        ["train", "--resume", str(run), "--steps", "128"], capsys, "latest.pt' is empty (0 bytes)"
    )


def test_resume_budget_names_the_users_value(run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    err = one_line(
        ["train", "--resume", str(run), "--steps", "32"],
        capsys,
        "already has 64 env steps (--steps 32 is not above it)",
    )
    assert "it was" not in err
    one_line(["train", "--resume", str(run)], capsys, "(its budget is 64)")


def test_resume_of_a_finished_run_changes_no_record(
    run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run that spent its budget, resumed as it is: it would train nothing, so it says the run
    is finished and how to go on, and every file (the last metrics line, the lineage, the
    checkpoints, config.yaml) stays byte for byte."""
    before = files_of(run)
    one_line(["train", "--resume", str(run)], capsys, "the run is already finished",
             "(its budget is 64)", "pass --steps N with N at least 66 to train it further")
    assert files_of(run) == before
    assert capsys.readouterr().out == ""


def test_resume_of_a_run_stopped_before_its_first_checkpoint(
    run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shutil.rmtree(run / "checkpoints")
    err = one_line(
        ["train", "--resume", str(run), "--steps", "128"],
        capsys,
        "no checkpoint to resume from",
        "--overwrite",
    )
    fresh = err.split("start it afresh with: ")[1].split()
    assert fresh[:2] == ["evohpo", "train"]
    assert main([*fresh[1:], "--quiet", "--steps", "32"]) == 0  # the command it gives works
    assert checkpoint.load(run / "checkpoints" / "latest.pt")[0]["env_steps"] == 32


def test_sweep_dry_run_shows_each_budget(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = sweep_file(tmp_path)
    assert (
        main(["sweep", str(path), "--out-dir", str(tmp_path / "o"), "--dry-run", "--steps", "1e3"])
        == 0
    )
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 4 and all("1,000 env steps" in line for line in lines)


@pytest.mark.parametrize(
    ("env", "settings", "says"),
    [
        (
            "simple_spread",
            ["games.scripted_opponents=1"],
            "'games.scripted_opponents': 1.0 needs a game of several teams",
        ),
    ],
)
def test_league_keys_the_game_cannot_take_leave_no_run_directory(
    env: str, settings: list[str], says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sets = [arg for s in settings for arg in ("--set", s)]
    args = ["train", "--algo", "matd3", "--env", env, *sets, "--run-dir", str(tmp_path / "r")]
    one_line([*args, "--steps", "32", "--quiet"], capsys, says)
    assert not (tmp_path / "r").exists()
