"""Batched mpe2: all envs of a pool held as arrays and advanced in one vectorised numpy step.

One mpe2 env step costs hundreds of microseconds of Python; here one numpy step advances every
env of the pool at once (see ``core.py``). mpe2 stays the definition of truth:
``tests/test_batched.py`` puts the same state into both and compares every observation,
reward, termination and truncation, and checks that resets draw from mpe2's distributions.
"""

from __future__ import annotations

from typing import Any

from evohpo.envs.batched.adversary import Adversary, Push
from evohpo.envs.batched.comm import Crypto, Reference, Simple, SpeakerListener
from evohpo.envs.batched.core import Scenario
from evohpo.envs.batched.spread import Formation, Line, Spread
from evohpo.envs.batched.tag import Tag, WorldComm
from evohpo.envs.batched.treasure import CollectTreasure

# short env name (as in evohpo.envs.registry) -> its batched implementation
SCENARIOS: dict[str, type[Scenario]] = {
    "simple": Simple,
    "simple_adversary": Adversary,
    "simple_crypto": Crypto,
    "simple_push": Push,
    "simple_reference": Reference,
    "simple_speaker_listener": SpeakerListener,
    "simple_spread": Spread,
    "simple_tag": Tag,
    "simple_world_comm": WorldComm,
    "collect_treasure": CollectTreasure,
    "simple_formation": Formation,
    "simple_line": Line,
}


def unsupported(name: str, kwargs: dict[str, Any] | None = None) -> str | None:
    """Why env ``name`` with these kwargs cannot run batched, or None if it can."""
    if name not in SCENARIOS:
        return f"env {name!r} has no batched implementation"
    if (kwargs or {}).get("render_mode") is not None:
        return "rendering (env.kwargs.render_mode) needs the pettingzoo backend"
    return None


__all__ = ["SCENARIOS", "Scenario", "unsupported"]
