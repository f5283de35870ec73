"""torch.Generator states that travel between devices.

A member's learning noise (target smoothing, Gumbel samples) comes from a ``torch.Generator`` on
its device, saved in its state. A CPU generator's state (Mersenne Twister) does not load into a
CUDA one (Philox: seed and offset) or back, so a run trained on a GPU could not be evaluated,
exported or resumed on a CPU without this.
"""

from __future__ import annotations

import torch

_PHILOX_BYTES = 16  # a CUDA generator's state: its seed, then its offset, each 8 bytes


def generator_fits(state: torch.Tensor, device: torch.device | str) -> bool:
    """Whether a torch.Generator state loads on ``device`` (a state fits its own device type
    only)."""
    try:
        torch.Generator(device=device).set_state(state)
    except RuntimeError:
        return False
    return True


def state_seed(state: torch.Tensor) -> int:
    """The seed a generator state started from, whichever device type it came from."""
    raw = state.detach().cpu().to(torch.uint8)
    if raw.numel() == _PHILOX_BYTES:  # read without CUDA, which this machine may not have
        return int.from_bytes(bytes(raw[:8].tolist()), "little")
    g = torch.Generator()
    g.set_state(raw)
    return g.initial_seed()


def generator_state(state: torch.Tensor, device: torch.device | str) -> torch.Tensor:
    """``state`` if it fits ``device``; else the state of a generator of ``device`` seeded with
    the state's seed (its stream restarts from that seed: exact continuation across device
    types is not possible anyway, their arithmetic differs)."""
    if generator_fits(state, device):
        return state
    return torch.Generator(device=device).manual_seed(state_seed(state)).get_state()
