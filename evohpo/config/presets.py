"""The shipped presets: YAML files inside the package (``evohpo/presets/``), found through
:mod:`importlib.resources` so that an ordinary (non-editable) install has them too."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

# a regular package on disk (wheel or source tree): the folder is a real directory
PRESETS_DIR = Path(str(resources.files("evohpo") / "presets"))


def preset_path(algo: str, env: str) -> Path:
    """``<algo>_<env without 'simple_'>.yaml``: the shipped defaults for that pair."""
    return PRESETS_DIR / f"{algo}_{env.removeprefix('simple_')}.yaml"


def preset_names() -> list[str]:
    """Every shipped preset's name, e.g. ``matd3_speaker_listener``."""
    return sorted(p.stem for p in PRESETS_DIR.glob("*.yaml"))
