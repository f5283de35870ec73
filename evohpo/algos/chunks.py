"""A round's rows in chunks: members' batches of different sizes laid out without padding
each to the largest.

A round's batch is drawn in chunks of one width (:func:`chunk_width`, chosen from the members'
batch sizes): a member's batch fills as many chunks as it needs, the last one padded, and each
chunk runs on its member's networks. A member of batch 500 beside one of 64 takes eight chunks
of 64 rows, not one row of 500 for each of them. :class:`Chunks` says which member owns which
chunk, sums a chunk's losses into its member's and lays out each member's own random draws.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

import torch

from evohpo.algos.buffer import Batch
from evohpo.algos.matd3 import MATD3

# what a chunk costs beyond its rows, in rows, once a round's chunks take copies of their
# members' weights (gathered, their gradients summed back): about 40 us a chunk against 3 us a
# row for 64-wide members on one CPU thread (speaker-listener, population 4)
CHUNK_COST = 16


def chunk_width(sizes: Sequence[int]) -> int:
    """Rows per chunk for batches of ``sizes``: the width, among the sizes, that costs the fewest
    rows (padding included), counting :data:`CHUNK_COST` more for every chunk where there are
    more chunks than members (their weights are then gathered)."""
    def cost(width: int) -> int:
        chunks = sum(-(-n // width) for n in sizes)
        return chunks * width + (chunks > len(sizes)) * chunks * CHUNK_COST

    return min(sorted(set(sizes)), key=cost)


class Chunks(NamedTuple):
    """A round's rows: chunks of ``width`` rows, chunk ``c`` of member ``owners[c]`` (members
    in order, a member's chunks together); ``owner`` is the same on the device."""

    owners: list[int]
    owner: torch.Tensor
    sizes: list[int]
    width: int

    @classmethod
    def of(cls, sizes: list[int], width: int, device: torch.device) -> Chunks:
        owners = [j for j, n in enumerate(sizes) for _ in range(-(-n // width))]
        return cls(owners, torch.tensor(owners, device=device), sizes, width)

    @property
    def one_each(self) -> bool:
        """One chunk per member, in order: each member's networks as they stand."""
        return len(self.owners) == len(self.sizes)

    def per_member(self, x: torch.Tensor) -> torch.Tensor:
        """``[C, ...]`` summed over each member's chunks: ``[M, ...]``."""
        if self.one_each:
            return x
        out = torch.zeros(len(self.sizes), *x.shape[1:], device=x.device, dtype=x.dtype)
        return out.index_add_(0, self.owner, x)

    def rows_of(self, j: int) -> slice:
        """Member ``j``'s rows of the chunks, flattened (``[C * width, ...]``)."""
        start = self.owners.index(j) * self.width
        return slice(start, start + self.sizes[j])


def select(batch: Batch, rows: torch.Tensor, chunks: Chunks,
            members: list[int]) -> tuple[Batch, torch.Tensor, Chunks]:
    """The chunks of ``members`` (in order), as a round of their own."""
    keep = [c for c, j in enumerate(chunks.owners) if j in members]
    idx = torch.tensor(keep, device=rows.device)

    def pick(d: dict[str, torch.Tensor] | None) -> dict[str, torch.Tensor] | None:
        return None if d is None else {a: t.index_select(0, idx) for a, t in d.items()}

    fields = [pick(getattr(batch, f)) for f in Batch._fields]
    sizes = [chunks.sizes[j] for j in members]
    owners = [members.index(chunks.owners[c]) for c in keep]
    sub = Chunks(owners, torch.tensor(owners, device=rows.device), sizes, chunks.width)
    return Batch(*fields), rows.index_select(0, idx), sub  # type: ignore[arg-type]


def draw(algos: Sequence[MATD3], chunks: Chunks, dim: int,
          fn: Callable[..., torch.Tensor], fill: float) -> torch.Tensor:
    """``[C, width, dim]``: member j's ``fn((n_j, dim))`` from its own generator on its rows,
    ``fill`` on the padding."""
    dev = algos[0].device
    draws = [fn((n, dim), generator=a.gen, device=dev)
             for a, n in zip(algos, chunks.sizes, strict=True)]
    if chunks.one_each and all(n == chunks.width for n in chunks.sizes):
        return torch.stack(draws)
    out = torch.full((len(chunks.owners) * chunks.width, dim), fill, device=dev)
    for j, d in enumerate(draws):
        out[chunks.rows_of(j)] = d
    return out.view(len(chunks.owners), chunks.width, dim)
