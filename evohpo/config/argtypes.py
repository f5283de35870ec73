"""Numeric command-line arguments, checked as the config checks its values: whole numbers
(``1e6`` and ``1_000_000`` included) within the range of the config key they set."""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
from collections.abc import Callable
from typing import Any


def _field(key: str) -> dataclasses.Field:
    from evohpo.config import Config

    obj: Any = Config()
    *sections, name = key.split(".")
    for s in sections:
        obj = getattr(obj, s)
    return next(f for f in dataclasses.fields(obj) if f.name == name)


def whole(key: str) -> Callable[[str], int]:
    """An argparse type: a whole number within the range of config key ``key``."""
    meta = _field(key).metadata
    lo, hi = meta.get("lo"), meta.get("hi")

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            try:
                f = float(text)
            except ValueError:
                f = math.nan
            if not (math.isfinite(f) and f.is_integer()):
                raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
            value = int(f)
        if (lo is not None and value < lo) or (hi is not None and value > hi):
            allowed = f"[{lo if lo is not None else '-inf'}, {hi if hi is not None else 'inf'}]"
            raise argparse.ArgumentTypeError(f"{value} is out of range; allowed {allowed}")
        return value

    parse.__name__ = "whole number"
    return parse


def wandb_mode_from_env() -> str:
    """What a bare ``--wandb`` means: online, unless WANDB_MODE in the environment says offline
    (or its old name dryrun) or disabled, as W&B users set it to mean exactly that."""
    mode = os.environ.get("WANDB_MODE", "").strip().lower()
    return {"offline": "offline", "dryrun": "offline", "disabled": "disabled"}.get(mode, "online")


class WandbMode(argparse.Action):
    """``--wandb [online|offline|disabled]``; bare, it follows WANDB_MODE (see above)."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        setattr(namespace, self.dest, wandb_mode_from_env() if values is None else values)
