"""Rendered frames to an animated GIF, with a step counter in a band of its own above the scene
(so it never covers an agent or the env's own text, wherever they are)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

BAND = 20  # px of caption band above each frame


def captioned(frame: Any, text: str) -> Any:
    """A PIL image: ``frame`` (H x W x 3, uint8) below a white band holding ``text``."""
    from PIL import Image, ImageDraw

    scene = Image.fromarray(np.asarray(frame, np.uint8)).convert("RGB")
    im = Image.new("RGB", (scene.width, scene.height + BAND), (255, 255, 255))
    im.paste(scene, (0, BAND))
    ImageDraw.Draw(im).text((8, 4), text, fill=(0, 0, 0))
    return im


def write_gif(frames: Sequence[Any], target: str | Path, ms_per_frame: int = 100) -> int:
    """Write ``frames`` as a looping GIF with a step counter; returns the number of frames."""
    images = [captioned(f, f"step {t}/{len(frames) - 1}") for t, f in enumerate(frames)]
    images[0].save(target, save_all=True, append_images=images[1:], duration=ms_per_frame, loop=0)
    return len(images)
