"""What every learning agent's losses of one MATD3 update share, computed once per batch."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from evohpo.buffer import Batch

if TYPE_CHECKING:
    from evohpo.algos.matd3 import MATD3


@dataclass
class LearnInputs:
    """What every agent's losses of one update share."""

    batch: Batch
    obs_all: torch.Tensor          # [B, sum obs_dim]
    act_all: list[torch.Tensor]    # per agent [B, act_dim], from the buffer
    critic_in: torch.Tensor        # [B, sum obs_dim + sum act_dim]
    targets: dict[str, torch.Tensor]
    masks: list[torch.Tensor]      # per agent [B]: 1 where it acted (one that left teaches nothing)
    denoms: list[torch.Tensor]

    @classmethod
    def of(cls, algo: MATD3, batch: Batch) -> LearnInputs:
        agents = algo.agents
        obs_all = torch.cat([batch.obs[a] for a in agents], dim=1)
        act_all = [batch.actions[a] for a in agents]
        masks = [batch.alive[a] for a in agents]
        return cls(batch, obs_all, act_all, torch.cat([obs_all, *act_all], dim=1),
                   algo.td_targets(batch), masks, [m.sum().clamp(min=1.0) for m in masks])
