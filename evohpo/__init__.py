"""evohpo: evolutionary hyperparameter optimisation of multi-agent RL while it trains.

The Python API (:mod:`evohpo.api`): ``evohpo.train(...)``, ``evohpo.resume(run_dir)`` and
``evohpo.load_run(run_dir)``; see the README for an example.
"""

from __future__ import annotations

from typing import Any

from evohpo.version import __version__

__all__ = ["GenerationInfo", "Run", "TrainResult", "__version__", "load_run", "resume", "train"]


def __getattr__(name: str) -> Any:
    # the API pulls in torch: loaded on first use, so `import evohpo` stays cheap
    if name in __all__:
        from evohpo import api

        return getattr(api, name)
    raise AttributeError(f"module 'evohpo' has no attribute {name!r}")
