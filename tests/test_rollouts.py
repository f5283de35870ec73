"""On-policy rollouts' bookkeeping: members of different rollout lengths, each handed exactly its
own rows of exactly the steps since it last learned, through trimming and a checkpoint."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from evohpo.algos.onpolicy import Rollout
from evohpo.evolve.member import Member
from evohpo.runtime.rollouts import Rollouts, member_rows

K = 2  # envs per member


@dataclass
class Hp:
    rollout: int


@dataclass
class Recorder:
    """A learner that records the rollouts it is handed."""

    hp: Hp
    on_policy: bool = True
    seen: list[Rollout] = field(default_factory=list)

    def learn_rollout(self, ro: Rollout) -> dict[str, float]:
        self.seen.append(ro)
        return {"actor_loss/a": 0.0}


def member(i: int, rollout: int) -> Member:
    return Member(i, None, Recorder(Hp(rollout)), np.random.default_rng(i))  # type: ignore[arg-type]


def step(t: int, n: int) -> dict[str, Any]:
    """Pool step ``t`` of ``n`` rows: every field says (t, row) so a rollout can be read back."""
    rows = np.arange(n, dtype=np.float32)
    code = (100 * t + rows)[:, None]
    return {"obs": {"a": code}, "actions": {"a": code + 0.5}, "rewards": {"a": code[:, 0]},
            "next_obs": {"a": code + 1000}, "terminated": {"a": np.zeros(n, np.float32)},
            "alive": {"a": np.ones(n, np.float32)}, "done": np.full(n, t % 4 == 3)}


def run(members: list[Member], steps: range, books: Rollouts, finish_at: int | None = None,
        ) -> None:
    rows = member_rows(len(members), K, None)
    n = len(members) * K
    for t in steps:
        books.add(**step(t, n))
        books.learn(members, rows, True, lambda *_: None, finish=t == finish_at)


def expected(j: int, ts: list[int]) -> np.ndarray:
    return np.array([[100 * t + j * K + r for r in range(K)] for t in ts], np.float32)


def check(rec: Recorder, j: int, spans: list[list[int]]) -> None:
    assert len(rec.seen) == len(spans)
    for ro, ts in zip(rec.seen, spans, strict=True):
        want = expected(j, ts)
        np.testing.assert_array_equal(ro.obs["a"][..., 0], want)
        np.testing.assert_array_equal(ro.next_obs["a"][..., 0], want + 1000)
        np.testing.assert_array_equal(ro.rewards["a"], want)
        np.testing.assert_array_equal(ro.done, np.array([[t % 4 == 3] * K for t in ts]))


def spans(length: int, upto: int, finish_at: int | None = None) -> list[list[int]]:
    out, cur = [], []
    for t in range(upto):
        cur.append(t)
        if len(cur) == length or t == finish_at:
            out.append(cur)
            cur = []
    return out


def test_members_of_different_rollout_lengths_get_their_own_rows_and_steps() -> None:
    lengths = [2, 3, 5]
    members = [member(j, n) for j, n in enumerate(lengths)]
    books = Rollouts()
    books.place(len(members))
    run(members, range(13), books, finish_at=12)  # a window of 13 steps: all learn at its end
    for j, n in enumerate(lengths):
        check(members[j].algo, j, spans(n, 13, finish_at=12))  # type: ignore[arg-type]
    assert books.steps == [] and books.first == books.now == 13  # nothing held after the window


def test_only_the_steps_a_rollout_still_holds_are_kept() -> None:
    members = [member(0, 2), member(1, 5)]
    books = Rollouts()
    books.place(2)
    run(members, range(7), books)
    # member 0 learned at steps 1, 3, 5; member 1 at step 4: it holds steps 5 and 6
    assert books.first == 5 and len(books.steps) == 2


def test_a_checkpoint_mid_rollout_hands_over_the_same_rollouts() -> None:
    lengths = [3, 4]
    straight = [member(j, n) for j, n in enumerate(lengths)]
    books = Rollouts()
    books.place(2)
    run(straight, range(11), books)
    resumed = [member(j, n) for j, n in enumerate(lengths)]
    first = Rollouts()
    first.place(2)
    run(resumed, range(6), first)
    again = Rollouts()
    again.load_state_dict(first.state_dict())
    again.place(2)  # a resumed window keeps the rollouts that came back with it
    run(resumed, range(6, 11), again)
    for j in range(2):
        a, b = straight[j].algo.seen, resumed[j].algo.seen  # type: ignore[attr-defined]
        assert len(a) == len(b) > 1
        for x, y in zip(a, b, strict=True):
            np.testing.assert_array_equal(x.obs["a"], y.obs["a"])
            np.testing.assert_array_equal(x.done, y.done)
