"""The keys a user sees: the listing of ``evohpo config`` and the docs, and the old names of
renamed keys (an old name is an unknown key whose error suggests the new one)."""

from __future__ import annotations

import dataclasses
from typing import Any

from evohpo.config.choices import CHOICES
from evohpo.config.schema import Bound, Config

# keys that moved, old name -> new name
RENAMED = {
    "population.teams": "games.teams",
    "population.scripted_opponents": "games.scripted_opponents",
    "population.opponent_actions": "games.opponent_actions",
    "eval.team_fitness": "games.fitness",
    "eval.opponents": "games.opponents",
    "eval.elo_k": "games.elo_k",
    "eval.reference_episodes": "games.reference_episodes",
}


def describe_keys(obj: Any = None, prefix: str = "") -> list[tuple[str, str, Any]]:
    """(key, doc, default) for every leaf key: used by `evohpo config` and the docs. A
    hyperparameter's range (a :class:`Bound`) is one key; a key naming a registry's entry
    (:data:`~evohpo.config.choices.CHOICES`) says the names its registry holds."""
    obj = Config() if obj is None else obj
    out = []
    for f in dataclasses.fields(obj):
        key = f"{prefix}.{f.name}" if prefix else f.name
        value = getattr(obj, f.name)
        if dataclasses.is_dataclass(value) and not isinstance(value, Bound):
            out.extend(describe_keys(value, key))
        else:
            doc = f.metadata.get("doc", "")
            if key in CHOICES:
                doc = f"{', '.join(CHOICES[key]())}: {doc}"
            out.append((key, doc, value))
    return out


def show(value: Any) -> str:
    """A default as `evohpo config` prints it (a range: ``{min: 1e-05, max: 0.01, ...}``)."""
    if not isinstance(value, Bound):
        return repr(value)

    def plain(v: Any) -> str:
        return str(v).lower() if isinstance(v, bool) else f"{v:g}" if isinstance(v, float) \
            else str(v)

    return "{" + ", ".join(f"{f.name}: {plain(getattr(value, f.name))}"
                           for f in dataclasses.fields(value)) + "}"
