"""Every shell command in README.md and the docs pages runs.

Each ``evohpo`` command of a bash or console block (tests/doc_commands.py reads them) runs in a
fresh directory with a small budget: a new run gets ``--steps`` of a few generations and the
settings of ``SMALL`` that the command does not set itself, ``eval`` at most a few episodes, a
sweep one seed. The pages' placeholders stand for tiny runs and files made here: ``runs/NAME``
(any path ending in capitals: ``runs/A``, ``RUN_DIR``) is a copy of a tiny run (of a game of two
teams when the command plays ``--against`` or names a ``--team``), a member id is one of that
run's members, ``...`` is a train command's own arguments, a YAML file that is not in the
repository is a small config or sweep file, and ``mypkg.envs:make_env`` is a module written here.
Console blocks that show an ``evohpo: error:`` line must print exactly that line and exit 2.

Commands that do not run here are listed below with where they run or why they cannot.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from evohpo import api, checkpoint
from evohpo.cli import main
from tests.doc_commands import ROOT, Command, all_commands, split

# what a command that is not `evohpo` may start with, and where it runs instead
ELSEWHERE: dict[tuple[str, ...], str] = {
    ("pip", "install"): ".ci/run installs torch (pinned) and then the package with its extras "
                        "into a fresh virtualenv, as these lines do",
    ("python3", "-m", "venv"): ".ci/run makes its fresh virtualenv the same way",
    (".",): "activates a virtualenv: .ci/run does",
    ("python", "-m", "pytest"): ".ci/run runs the suite; -m slow picks the long tests, on demand",
    ("ruff", "check"): ".ci/run",
    ("mypy",): ".ci/run",
    ("mkdocs", "build"): ".ci/run builds the site with --strict",
    ("mkdocs", "serve"): "serves the site until stopped; .ci/run builds it",
    ("bash", ".ci/run"): "CI itself",
    ("python", "docs/gen_config.py"): ".ci/run checks the page it writes (--check)",
    ("python", "benchmarks/results_page.py"): ".ci/run checks the pages it writes (--check)",
    ("ray", "start"): "starts a node of a Ray cluster; tests/test_ray.py runs evohpo on a local "
                      "Ray instance",
    ("git", "worktree"): "the behaviour check of a refactor (a checkout of the code before it)",
    ("cd",): "the behaviour check of a refactor (into the checkout of the code before it)",
    ("python", "benchmarks/same_runs.py"): "the behaviour check of a refactor: trains every "
                                           "preset for minutes; a benchmark, not a test",
}
# `evohpo` commands that do not run here, by the words that mark them
NOT_HERE: dict[tuple[str, ...], str] = {
    ("--ray-address",): "needs a Ray cluster (HEAD_HOST is its head node); tests/test_ray.py "
                        "runs the same code on a local Ray instance",
    ("--backend", "ray"): "starts a local Ray instance (tens of seconds): tests/test_ray.py",
    ("--render", "human"): "opens a window",
}

STEPS = 2000  # a new run's budget: a few generations with the settings below
SMALL: dict[str, Any] = {  # what makes a run small; a command's own --set wins
    "evolution.evo_steps": 128, "evolution.learning_delay": 0, "algo.rollout": 2,
    "algo.batch_size": 16, "algo.hidden": [16], "buffer.capacity": 5000, "eval.episodes": 2,
    "eval.confirm_episodes": 2, "games.reference_episodes": 2, "env.pool": "sync"}
EPISODES = 4  # at most this many for `evohpo eval --episodes`
PLACEHOLDER = re.compile(r"(^|/)[A-Z][A-Z0-9_]*/?$")  # runs/NAME, runs/A, RUN_DIR
MYPKG = '''"""A factory of the user's own, as the pages' mypkg.envs:make_env."""
from mpe2 import simple_spread_v3


def make_env(size=3, **kwargs):
    """simple_spread with episodes of 5 x size steps: a keyword of the factory's own."""
    return simple_spread_v3.parallel_env(N=2, max_cycles=5 * size, continuous_actions=True,
                                         **kwargs)
'''


def contains(argv: tuple[str, ...], words: tuple[str, ...]) -> bool:
    return any(argv[i:i + len(words)] == words for i in range(len(argv)))


def marked(table: dict[tuple[str, ...], str], argv: tuple[str, ...],
           start: bool = False) -> str | None:
    """Why ``argv`` does not run here, from ``table`` (its first words when ``start``)."""
    for words, why in table.items():
        if argv[:len(words)] == words if start else contains(argv, words):
            return why
    return None


def evohpo_argv(argv: tuple[str, ...]) -> tuple[str, ...] | None:
    """The arguments after ``evohpo`` (or ``python -m evohpo``); None for other commands."""
    if argv[:1] == ("evohpo",):
        return argv[1:]
    if argv[:3] in (("python", "-m", "evohpo"), ("python3", "-m", "evohpo")):
        return argv[3:]
    return None


@dataclass(frozen=True)
class Case:
    commands: tuple[Command, ...]  # the same command on every page that gives it
    args: tuple[str, ...]          # what runs, before placeholders are made
    error: tuple[str, ...]         # the error lines a console block shows


def option(args: list[str], flag: str) -> int | None:
    return args.index(flag) if flag in args else None


def set_option(args: list[str], flag: str, value: str) -> None:
    i = option(args, flag)
    if i is None:
        args += [flag, value]
    else:
        args[i + 1] = value


def budgeted(args: tuple[str, ...]) -> tuple[str, ...]:
    """A command's arguments with a small budget (the placeholders still in)."""
    out: list[str] = []
    optional = False
    for a in args:  # `[--steps N]`: an option the reader may add
        optional = optional or a.startswith("[-")
        if not optional:
            out += ["--algo", "matd3", "--env", "simple_speaker_listener"] if a == "..." else [a]
        optional = optional and not a.endswith("]")
    if out[:1] == ["train"] and "--resume" not in out:
        given = {out[i + 1].split("=", 1)[0] for i, a in enumerate(out[:-1]) if a == "--set"}
        set_option(out, "--steps", str(STEPS))
        for key, value in SMALL.items():
            if key not in given:
                out += ["--set", f"{key}={json.dumps(value)}"]
        if option(out, "--run-dir") is None:
            out += ["--run-dir", "runs/doc"]
    elif out[:1] == ["train"] and option(out, "--steps") is not None:
        set_option(out, "--steps", str(2 * STEPS))  # beyond the tiny run's own budget
    elif out[:1] == ["eval"] and (i := option(out, "--episodes")) is not None:
        out[i + 1] = str(min(int(out[i + 1]), EPISODES) if out[i + 1].isdigit() else EPISODES)
    elif out[:1] == ["sweep"]:
        set_option(out, "--steps", str(STEPS))
        set_option(out, "--seeds", "0")
    return tuple(out)


def cases() -> list[Case]:
    found: dict[tuple[str, ...], list[Command]] = {}
    for cmd in all_commands():
        args = evohpo_argv(cmd.argv)
        if args is not None and not marked(NOT_HERE, args):
            found.setdefault(budgeted(args), []).append(cmd)
    return [Case(tuple(cmds), args,
                 tuple(line for c in cmds for line in c.output if line.startswith("evohpo:")))
            for args, cmds in found.items()]


CASES = cases()


# ----------------------------------------------------------------------------- what they need


def tiny_run(path: Path, env: str, stop_at: int | None) -> Path:
    """A small run of MATD3 on ``env``; ``stop_at``: stopped after that generation, as an
    interrupted run is, with budget left to resume."""
    api.train(None, algo="matd3", env=env, steps=STEPS, seed=0, overrides=SMALL, run_dir=path,
              overwrite=True,  # where an earlier try failed half-way
              callbacks=[lambda gen: stop_at is not None and gen.generation >= stop_at])
    return path


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """Tiny runs, each made when first asked for: 'one' (one population, stopped early) and
    'teams' (a game of two teams)."""
    base = tmp_path_factory.mktemp("runs")
    made: dict[str, Path] = {}

    def get(kind: str) -> Path:
        if kind not in made:
            made[kind] = (tiny_run(base / kind, "simple_speaker_listener", 1) if kind == "one"
                          else tiny_run(base / kind, "simple_adversary", None))
        return made[kind]
    return get


def members(run: Path) -> list[tuple[int, Any]]:
    """(id, team) of each member in the run's latest checkpoint: a page's member ids stand for
    these."""
    meta, _ = checkpoint.load(run / "checkpoints" / "latest.pt")
    return [(m["id"], m.get("team")) for m in meta["members"]]


def make_placeholders(args: list[str], cwd: Path, runs: Callable[[str], Path]) -> list[str]:
    """Make what the command's placeholders stand for, under ``cwd``; the arguments to run."""
    kind = "teams" if {"--against", "--team"} & set(args) else "one"
    for i, a in enumerate(args):
        prev = args[i - 1] if i else ""
        takes_run = not prev.startswith("-") or prev in ("--resume", "--against")
        if PLACEHOLDER.search(a) and takes_run:
            if not (cwd / a).exists():
                shutil.copytree(runs(kind), cwd / a)
        elif a.endswith((".yaml", ".yml")) and not (cwd / a).exists():
            (cwd / a).parent.mkdir(parents=True, exist_ok=True)
            (cwd / a).write_text(yaml.safe_dump(small_file(a, sweep=args[0] == "sweep")))
    for flag in ("--member", "--against"):
        i = option(args, flag)
        if i is not None and args[i + 1].isdigit():
            ids = members(runs(kind))  # the first member, and a member of another team
            args[i + 1] = str(ids[0][0] if flag == "--member" else
                              next(m for m, team in ids if team != ids[0][1]))
    return args


def small_file(name: str, sweep: bool) -> dict[str, Any]:
    """The repository's file ``name`` with a small budget, else one standing in for it."""
    source = ROOT / name
    if sweep:
        spec = (yaml.safe_load(source.read_text()) if source.is_file() else
                {"name": Path(name).stem, "base": "matd3_speaker_listener",
                 "variants": {"preset": {}, "slower": {"algo.lr_actor": 5e-4}}})
        return {**spec, "set": {**(spec.get("set") or {}), **SMALL}}
    if source.is_file():
        return yaml.safe_load(source.read_text())
    return yaml.safe_load((ROOT / "evohpo" / "presets" / "matd3_speaker_listener.yaml")
                          .read_text())


@pytest.fixture(scope="module")
def mypkg(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("mypkg")
    (base / "mypkg").mkdir()
    (base / "mypkg" / "__init__.py").write_text("")
    (base / "mypkg" / "envs.py").write_text(MYPKG)
    return base


# ----------------------------------------------------------------------------- the tests


@pytest.mark.parametrize("case", CASES, ids=[c.commands[0].where for c in CASES])
def test_every_evohpo_command_in_the_docs_runs(
        case: Case, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str], runs: Callable[[str], Path], mypkg: Path) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(mypkg))
    monkeypatch.setenv("WANDB_MODE", "offline")  # no W&B login here; the pages say so
    args = make_placeholders(list(case.args), tmp_path, runs)
    try:
        rc = main(args)
    except SystemExit as e:  # --help, --version
        rc = int(e.code or 0)
    err = capsys.readouterr().err
    where = ", ".join(c.where for c in case.commands)
    if case.error:
        assert rc == 2 and err.strip().splitlines() == list(case.error), (
            f"{where}: the page shows {list(case.error)}; `evohpo {' '.join(args)}` printed "
            f"{err.strip()!r} (exit {rc})")
    else:
        assert rc == 0, f"{where}: `evohpo {' '.join(args)}` exited {rc}: {err.strip()[-800:]}"


def test_every_other_command_says_where_it_runs() -> None:
    missing = [f"{c.where}: {' '.join(c.argv)}" for c in all_commands()
               if evohpo_argv(c.argv) is None and not marked(ELSEWHERE, c.argv, start=True)]
    assert not missing, ("commands the docs give that no test runs; run them here or add them "
                         f"to ELSEWHERE with where they run: {missing}")


def test_what_is_left_to_ci_is_in_ci_run() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    for words, why in ELSEWHERE.items():
        if why.startswith(".ci/run"):
            assert " ".join(words) in ci, (words, why)


def test_the_pages_commands_are_read_as_a_shell_reads_them(tmp_path: Path) -> None:
    from tests.doc_commands import commands

    (tmp_path / "docs").mkdir()
    (tmp_path / "inc.md").write_text("```bash\nevohpo config\n```\n")
    (tmp_path / "docs" / "p.md").write_text(
        "text\n\n```bash\nevohpo train --algo matd3 \\\n    --set algo.lr_actor=3e-4  # why\n"
        "evohpo envs; evohpo config && pip install -e \".[ray]\"\n```\n\n"
        "```python\nevohpo.train()\n```\n\n"
        "1. a step:\n\n    ```console\n    $ evohpo train --algo foo\n"
        "    evohpo: error: no\n    ```\n\n--8<-- \"inc.md\"\n")
    got = [(c.where, c.argv, c.output) for c in commands(tmp_path / "docs" / "p.md", tmp_path)]
    assert got == [
        ("docs/p.md:4", ("evohpo", "train", "--algo", "matd3", "--set", "algo.lr_actor=3e-4"),
         ()),
        ("docs/p.md:6", ("evohpo", "envs"), ()),
        ("docs/p.md:6", ("evohpo", "config"), ()),
        ("docs/p.md:6", ("pip", "install", "-e", ".[ray]"), ()),
        ("docs/p.md:16", ("evohpo", "train", "--algo", "foo"), ("evohpo: error: no",)),
        ("inc.md:2", ("evohpo", "config"), ()),
    ]
    with pytest.raises(ValueError, match="redirects"):
        split("evohpo config > keys.txt", "x.md:1")
    # placeholders and budgets
    assert budgeted(("sweep", "S.yaml", "[--steps", "N]", "--dry-run")) == (
        "sweep", "S.yaml", "--dry-run", "--steps", str(STEPS), "--seeds", "0")
    train = budgeted(("train", "...", "--steps", "9", "--set", "eval.episodes=50"))
    assert train[:6] == ("train", "--algo", "matd3", "--env", "simple_speaker_listener",
                         "--steps") and train[6] == str(STEPS)
    assert "eval.episodes=50" in train and "eval.episodes=2" not in train
    assert "env.num_envs" not in " ".join(train)  # the docs' own num_envs, never one of ours
