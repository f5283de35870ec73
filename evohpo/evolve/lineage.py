"""What a mutation did to a member: one :class:`MutationRecord` per member and generation.

Evolution writes them to ``lineage.jsonl``; the algorithms' own mutations (architecture,
activation) fill them in. An operator that could not apply records what it became.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any


@dataclass
class MutationRecord:
    generation: int
    member_id: int
    parent_id: int | None
    kind: str           # none | hyperparameters | weights | architecture | activation | elite
    target: str = ""    # e.g. "lr_actor", "actors", "listener_0/actor/layer1"
    before: Any = None  # e.g. 0.001, [64, 64], "relu"
    after: Any = None
    op: str = ""        # e.g. "*1.2", "gaussian ...", "add_node +16", "set_activation"
    note: str = ""
    team: str | None = None  # on games of several teams, the member's team

    def outcome(self, kind: str, target: str = "", before: Any = None, after: Any = None,
                op: str = "", note: str = "") -> MutationRecord:
        """This record (same generation and member) saying what the mutation did."""
        return dataclasses.replace(self, kind=kind, target=target, before=before, after=after,
                                   op=op, note=note)

    def to_json(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        if self.team is None:  # one team: the records read as they always did
            del out["team"]
        return out
