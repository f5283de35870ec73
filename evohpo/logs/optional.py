"""The loggers a run turns on beyond the console and JSONL: TensorBoard and W&B, each imported
only when its config asks for it."""

from __future__ import annotations

from pathlib import Path

from evohpo.config import Config
from evohpo.logs.loggers import Logger


def optional_loggers(cfg: Config, run_dir: Path, resume: bool, quiet: bool = False
                     ) -> list[Logger]:
    """TensorBoard's logger, then W&B's, as ``cfg.logging`` asks. One that cannot start
    (TensorBoard not installed, W&B without a login) closes those started before it and raises
    its one-line error. ``quiet`` (``--quiet``): W&B prints nothing either."""
    out: list[Logger] = []
    try:
        if cfg.logging.tensorboard:
            from evohpo.logs.tensorboard import TensorboardLogger

            out.append(TensorboardLogger(run_dir, resume=resume))
        if cfg.logging.wandb.mode != "disabled":
            from evohpo.logs.wandb import WandbLogger

            out.append(WandbLogger(cfg, run_dir, resume=resume, quiet=quiet))
    except BaseException:
        for logger in out:
            logger.close()
        raise
    return out
