"""What the command line prints for a run: counts in words that agree with them, and eval's table
with every row in its columns."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest

from evohpo.cli import main
from tests.test_checkpoint import train


@pytest.fixture(scope="module")
def one_generation(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A run whose budget (32 env steps) ends inside its first window (one generation), and
    what its command printed."""
    run = tmp_path_factory.mktemp("one") / "r"
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert train(run, 32) == 0
    return run, out.getvalue()


def test_one_generation_and_one_episode_are_said_in_the_singular(
        one_generation: tuple[Path, str], capsys: pytest.CaptureFixture[str]) -> None:
    run, printed = one_generation
    done = printed.strip().splitlines()[-2]
    assert done.startswith("done: 1 generation, 32 env steps in "), done
    assert main(["eval", str(run), "--episodes", "1"]) == 0
    head = capsys.readouterr().out.splitlines()[0]
    assert ": 1 episode, seed " in head, head
    assert main(["eval", str(run), "--episodes", "2"]) == 0
    assert ": 2 episodes, seed " in capsys.readouterr().out.splitlines()[0]


def test_eval_rows_fit_their_columns(one_generation: tuple[Path, str],
                                     capsys: pytest.CaptureFixture[str]) -> None:
    """simple_speaker_listener's fitness row is named after both agents (30 characters, more
    than the 20 an agent's row needs): every row's returns still start in one column."""
    assert main(["eval", str(one_generation[0]), "--episodes", "1"]) == 0
    rows = capsys.readouterr().out.splitlines()[1:]
    assert [r.split()[0] for r in rows] == ["speaker_0", "listener_0", "fitness"]
    assert rows[-1].startswith("    fitness (speaker_0+listener_0) return ")
    assert len({r.index(" return ") for r in rows}) == 1, "\n".join(rows)
