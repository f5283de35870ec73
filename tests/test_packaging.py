"""The wheel is what a user installs: it must carry the shipped presets, and an ordinary
(non-editable) install must find every one of them from any working directory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PRESETS = sorted(p.name for p in (ROOT / "evohpo" / "presets").glob("*.yaml"))


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    # no build isolation: setuptools comes from the test extra, no index needed
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                    "-q", "-w", str(out), str(ROOT)], check=True, cwd=out)
    (found,) = out.glob("evohpo-*.whl")
    return found


def test_the_wheel_carries_every_preset(wheel: Path) -> None:
    assert len(PRESETS) >= 7
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {f"evohpo/presets/{p}" for p in PRESETS} <= names


def test_an_installed_wheel_resolves_every_preset(wheel: Path, tmp_path: Path) -> None:
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target",
                    str(site), str(wheel)], check=True)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    script = (
        "import json, evohpo, evohpo.api as api\n"
        "from evohpo.config.presets import preset_names\n"
        "out = {}\n"
        "for name in preset_names():\n"
        "    algo, env = name.split('_', 1)\n"
        "    cfg, notes = api.resolve(algo=algo, env='simple_' + env)\n"
        "    out[name] = [cfg.algo.hidden, cfg.env.name, notes, evohpo.__file__]\n"
        "print(json.dumps(out))\n")
    env = {**os.environ, "PYTHONPATH": str(site)}  # the installed copy, not the source tree
    res = subprocess.run([sys.executable, "-c", script], cwd=elsewhere, env=env, check=True,
                         capture_output=True, text=True)
    got = json.loads(res.stdout)
    assert sorted(got) == [p.removesuffix(".yaml") for p in PRESETS]
    for name, (_hidden, env_name, notes, module) in got.items():
        assert Path(module).is_relative_to(site), module
        assert env_name == "simple_" + name.split("_", 1)[1]
        assert len(notes) == 1 and str(site) in notes[0], notes  # from the installed preset
    assert got["matd3_tag"][0] == [128, 128]  # the tuned preset, not the generic 64 wide
