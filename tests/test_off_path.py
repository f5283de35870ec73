"""Off the shipped path: the version, read-only run directories, env factories in a local file,
and summaries that agree with each other."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from evohpo.cli import main
from evohpo.report.data import read_jsonl
from tests.mounts import read_only
from tests.test_checkpoint import ARGS, train

ROOT = Path(__file__).resolve().parents[1]


def evohpo_cli(*args: str, cwd: Path | None = None,
               env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "evohpo", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def test_version_prints_the_package_version() -> None:
    from evohpo.version import __version__

    proc = evohpo_cli("--version", env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"evohpo {__version__}"


def test_overwrite_into_a_read_only_run_directory_is_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "run"
    assert train(run, 32) == 0
    before = sorted(p.name for p in run.iterdir())
    with read_only(run):
        capsys.readouterr()
        assert train(run, 32, "--overwrite") == 2
        err = capsys.readouterr().err
        assert err.startswith(f"evohpo: error: run directory {str(run)!r}")
        assert "read-only" in err.lower() and len(err.strip().splitlines()) == 1
    assert sorted(p.name for p in run.iterdir()) == before  # nothing was cleared


ENVMOD = """from mpe2 import simple_spread_v3


def spread2(**kwargs):
    return simple_spread_v3.parallel_env(N=2, **kwargs)
"""
TINY_ARGS = [a for a in ARGS if a not in ("--env", "simple_speaker_listener")]


def console_script(tmp_path: Path) -> Path:
    """The `evohpo` command as pip installs it: a script whose own folder, not the working
    directory, heads sys.path."""
    script = tmp_path / "bin" / "evohpo"
    script.parent.mkdir()
    script.write_text("import sys\nfrom evohpo.cli import main\nsys.exit(main())\n")
    return script


@pytest.mark.parametrize("pool", ["sync", "async"])
def test_a_factory_in_a_local_file_is_found_as_python_m_would(tmp_path: Path, pool: str) -> None:
    here = tmp_path / "project"
    here.mkdir()
    (here / "envmod.py").write_text(ENVMOD)
    script = console_script(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}  # evohpo itself; not the working directory
    proc = subprocess.run([sys.executable, str(script), "train", "--env", "envmod:spread2",
                           *TINY_ARGS, "--set", f"env.pool={pool}", "--steps", "32",
                           "--run-dir", "run"], cwd=here, env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "envmod:spread2" in (here / "run" / "config.yaml").read_text()
    # a module that is nowhere: the error says where it was looked for
    proc = subprocess.run([sys.executable, str(script), "train", "--env", "nomod:spread2",
                           *TINY_ARGS, "--steps", "32"], cwd=here, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert f"working directory {str(here)!r}" in proc.stderr and "PYTHONPATH" in proc.stderr


@pytest.mark.parametrize(("env", "holds"), [("mypkg.envs:make_env", "mypkg/envs.py"),
                                             ("mymod:make_env", "mymod.py")])
def test_a_missing_module_names_the_file_to_run_beside(
        env: str, holds: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A factory in a package that is nowhere: the line names the package's own file, not a
    module file of the package's name."""
    monkeypatch.chdir(tmp_path)  # a working directory that holds neither
    assert main(["train", "--env", env, *TINY_ARGS, "--steps", "32"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    assert f"run from the folder that holds {holds}, or add it to PYTHONPATH" in err, err


def test_the_last_line_names_the_member_eval_uses(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    from evohpo.report.data import best_checkpoint_meta

    run = tmp_path / "run"
    assert train(run, 64, "--set", "eval.confirm_episodes=2") == 0
    line = capsys.readouterr().out.strip().splitlines()[-2]  # the last names what comes next
    kept = best_checkpoint_meta(run)["member"]  # type: ignore[index]
    said = f"kept member {kept['id']} (what eval and export use), fitness {kept['fitness']:.2f}"
    assert said in line, line
    assert main(["eval", str(run), "--episodes", "1"]) == 0
    assert f"member {kept['id']} of" in capsys.readouterr().out


def test_a_resumed_runs_time_is_the_whole_runs(tmp_path: Path) -> None:
    import evohpo
    from tests.test_api import TINY

    first = evohpo.train({**TINY, "steps": 64}, run_dir=tmp_path / "r")
    resumed = evohpo.resume(tmp_path / "r", steps=96)
    last = read_jsonl(tmp_path / "r" / "metrics.jsonl")[-1]["time/elapsed_s"]
    assert resumed.summary["wall_s"] >= max(last, first.summary["wall_s"])


def said_seconds(line: str, before: str) -> float:
    """The seconds a console line gives after ``before``, with their fraction."""
    found = re.search(rf"{before}(\d+\.\d+)s\b", line)
    assert found, line
    return float(found[1])


def test_a_short_runs_time_is_not_0s_and_a_resumed_one_is_the_whole_runs(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "run"
    assert train(run, 32) == 0
    first = said_seconds(capsys.readouterr().out.strip().splitlines()[-2], "env steps in ")
    assert first > 0
    assert main(["train", "--resume", str(run), "--steps", "64"]) == 0
    *gens, done, _ = capsys.readouterr().out.strip().splitlines()  # the last: what comes next
    total = said_seconds(done, "env steps in ")
    logged = read_jsonl(run / "metrics.jsonl")[-1]["time/elapsed_s"]
    last_line = said_seconds([g for g in gens if g.startswith("gen ")][-1], "steps/s  ")
    assert last_line == pytest.approx(logged, abs=0.05)  # the line is the metrics' clock
    assert total >= max(last_line, first)  # both sessions, up to the last line and after


def test_a_hand_edited_or_cut_short_config_does_not_resume(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "run"
    assert train(run, 32) == 0
    text = (run / "config.yaml").read_text()
    assert "name: matd3" in text
    (run / "config.yaml").write_text(text.replace("name: matd3", "name: maddpg"))
    capsys.readouterr()
    assert main(["train", "--resume", str(run), "--steps", "64", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "algo.name is 'maddpg', the checkpoint was trained with 'matd3'" in err, err
    assert len(err.strip().splitlines()) == 1
    lines = text.splitlines(keepends=True)  # cut short before the algo section
    (run / "config.yaml").write_text("".join(lines[: next(
        i for i, ln in enumerate(lines) if ln.startswith("algo:"))]))
    assert main(["train", "--resume", str(run), "--steps", "64", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "looks cut short: it has no algo" in err and len(err.strip().splitlines()) == 1, err
    (run / "config.yaml").write_text(text)  # put back: it resumes
    assert main(["train", "--resume", str(run), "--steps", "64", "--quiet"]) == 0
