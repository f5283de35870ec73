"""Exported policies outside evohpo: batches of float32 or float64 observations, one observation
as a batch of one, and the README's example playing an exported team in plain mpe2."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from evohpo.cli import main
from evohpo.playback import load as playback
from tests.test_checkpoint import train

README = Path(__file__).resolve().parent.parent / "README.md"


@pytest.fixture(scope="module", params=[False, True], ids=["discrete", "continuous"])
def exported(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("exported")
    assert (
        train(
            base / "run", 64, "--set", f"env.kwargs.continuous_actions={str(request.param).lower()}"
        )
        == 0
    )
    assert main(["export", str(base / "run"), "--out", str(base / "policies")]) == 0
    return base


def test_policy_takes_float32_and_float64_batches_and_one_observation(exported: Path) -> None:
    note = json.loads((exported / "policies" / "spaces.json").read_text())
    _, spec, algo, _ = playback.load_member(exported / "run")
    rng = np.random.default_rng(0)
    for a, s in note["agents"].items():
        policy = torch.export.load(exported / "policies" / s["file"]).module()
        obs = rng.normal(size=(5, spec[a].obs_dim))  # float64, numpy's default
        expected, _ = algo.act(
            {
                b: obs.astype(np.float32) if b == a else np.zeros((5, spec[b].obs_dim), np.float32)
                for b in spec.agents
            },
            None,
        )
        want = expected[a][:, 0].astype(np.int64) if spec[a].discrete else expected[a]
        got64 = policy(torch.from_numpy(obs)).numpy()
        got32 = policy(torch.from_numpy(obs.astype(np.float32))).numpy()
        np.testing.assert_allclose(got64, want, atol=1e-6)
        np.testing.assert_array_equal(got64, got32)
        one = policy(torch.as_tensor(obs[2])[None])[0].numpy()  # one observation: a batch of one
        np.testing.assert_allclose(one, want[2], atol=1e-6)
        assert got32.dtype == (np.int64 if spec[a].discrete else np.float32)


def readme_example() -> str:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    (block,) = [b for b in blocks if "torch.export.load" in b]
    return block


def test_readme_example_plays_an_exported_team_in_plain_mpe2(exported: Path) -> None:
    check = "\nimport sys\nassert not env.agents and 'evohpo' not in sys.modules\n"
    proc = subprocess.run(
        [sys.executable, "-c", readme_example() + check],
        cwd=exported,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
