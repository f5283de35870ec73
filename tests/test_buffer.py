"""ReplayBuffer: heterogeneous agents, joint-row consistency, circular storage, sampling, state."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from evohpo.algos.buffer import Batch, ReplayBuffer
from evohpo.envs.spec import AgentSpec, EnvSpec

SPEC = EnvSpec(
    name="hetero",
    agents=("speaker", "listener"),
    per_agent={
        "speaker": AgentSpec(obs_dim=3, discrete=True, act_dim=3),
        "listener": AgentSpec(obs_dim=11, discrete=False, act_dim=5, low=-1.0, high=1.0),
    },
)
AGENT_IDX = {a: i for i, a in enumerate(SPEC.agents)}
FIELDS = ("obs", "actions", "rewards", "next_obs", "terminated")


# Every value encodes the transition id t (>= 1, so an unwritten all-zero row decodes to 0),
# the agent, the field and the column: all exact in float32 for t < 10_000.
def _obs(t: int, a: str, nxt: bool = False) -> np.ndarray:
    d = SPEC[a].obs_dim
    return (t * 1000 + 500 * nxt + 100 * AGENT_IDX[a] + np.arange(d)).astype(np.float32)


def _act(t: int, a: str) -> np.ndarray:
    s = SPEC[a]
    if s.discrete:
        return np.eye(s.act_dim, dtype=np.float32)[t % s.act_dim]
    return (t * 1000 + 300 + np.arange(s.act_dim)).astype(np.float32)


def _rew(t: int, a: str) -> float:
    return float(t * 10 + AGENT_IDX[a])


def _term(t: int, a: str) -> float:
    return float((t + AGENT_IDX[a]) % 2)


def add_rows(buf: ReplayBuffer, ts: list[int]) -> None:
    """One vector step: len(ts) envs, one transition each."""
    obs = {a: np.stack([_obs(t, a) for t in ts]) for a in SPEC.agents}
    nxt = {a: np.stack([_obs(t, a, True) for t in ts]) for a in SPEC.agents}
    act = {a: np.stack([_act(t, a) for t in ts]) for a in SPEC.agents}
    rew = {a: np.array([_rew(t, a) for t in ts], np.float32) for a in SPEC.agents}
    term = {a: np.array([_term(t, a) for t in ts], np.float32) for a in SPEC.agents}
    buf.add(obs, act, rew, nxt, term)


def decode(batch: Batch) -> np.ndarray:
    """The transition id of every row (from the speaker's first observation column)."""
    return (batch.obs["speaker"][:, 0].numpy() // 1000).astype(int)


def check_consistent(batch: Batch) -> np.ndarray:
    """Assert that every field of every agent in each row comes from one and the same transition."""
    ts = decode(batch)
    for a in SPEC.agents:
        np.testing.assert_array_equal(batch.obs[a].numpy(), np.stack([_obs(t, a) for t in ts]))
        np.testing.assert_array_equal(batch.next_obs[a].numpy(),
                                      np.stack([_obs(t, a, True) for t in ts]))
        np.testing.assert_array_equal(batch.actions[a].numpy(), np.stack([_act(t, a) for t in ts]))
        np.testing.assert_array_equal(batch.rewards[a].numpy(), [_rew(t, a) for t in ts])
        np.testing.assert_array_equal(batch.terminated[a].numpy(), [_term(t, a) for t in ts])
    return ts


def test_shapes_and_dtypes_per_agent():
    buf = ReplayBuffer(SPEC, capacity=50)
    add_rows(buf, [1, 2, 3, 4, 5])
    b = buf.sample(7, np.random.default_rng(0))
    assert isinstance(b, Batch)
    for a in SPEC.agents:
        s = SPEC[a]
        assert tuple(b.obs[a].shape) == (7, s.obs_dim)
        assert tuple(b.next_obs[a].shape) == (7, s.obs_dim)
        assert tuple(b.actions[a].shape) == (7, s.act_dim)
        assert tuple(b.rewards[a].shape) == (7,)
        assert tuple(b.terminated[a].shape) == (7,)
        for f in FIELDS:
            t = getattr(b, f)[a]
            assert t.dtype == torch.float32 and t.device.type == "cpu"
    for f in FIELDS:
        assert list(getattr(b, f)) == list(SPEC.agents)
    # discrete actions are one-hot
    assert torch.all(b.actions["speaker"].sum(1) == 1)


def test_sampled_rows_are_whole_transitions_across_agents():
    buf = ReplayBuffer(SPEC, capacity=64)
    t = 1
    for n in (3, 5, 1, 8, 4):  # vector steps of various widths
        add_rows(buf, list(range(t, t + n)))
        t += n
    assert len(buf) == buf.size == t - 1 == buf.added
    b = buf.sample(500, np.random.default_rng(1))
    ts = check_consistent(b)
    assert set(ts) == set(range(1, t))  # 500 draws from 21 rows hit every one


def test_gather_returns_rows_in_insertion_order():
    buf = ReplayBuffer(SPEC, capacity=20)
    add_rows(buf, [11, 12, 13])
    add_rows(buf, [14, 15])
    b = buf.gather(np.array([4, 0, 2, 2]))
    assert list(check_consistent(b)) == [15, 11, 13, 13]


def test_circular_wrap_around():
    buf = ReplayBuffer(SPEC, capacity=10)
    expected_pos = [4, 8, 2, 6]
    expected_size = [4, 8, 10, 10]
    for k in range(4):
        add_rows(buf, [4 * k + i + 1 for i in range(4)])  # ids 1..16
        assert buf.pos == expected_pos[k]
        assert buf.size == len(buf) == expected_size[k]
        assert buf.added == 4 * (k + 1)
        if k == 2:  # ids 11, 12 overwrote rows 0, 1 (ids 1, 2)
            rows = check_consistent(buf.gather(np.arange(10)))
            assert list(rows) == [11, 12, 3, 4, 5, 6, 7, 8, 9, 10]
    rows = check_consistent(buf.gather(np.arange(10)))
    # the 6 oldest (ids 1..6) were overwritten in order by ids 11..16; the 10 newest remain
    assert list(rows) == [11, 12, 13, 14, 15, 16, 7, 8, 9, 10]
    assert buf.added == 16


def test_wrap_inside_one_add():
    buf = ReplayBuffer(SPEC, capacity=5)
    add_rows(buf, [1, 2, 3])
    add_rows(buf, [4, 5, 6, 7])  # rows 3, 4, 0, 1
    assert (buf.pos, buf.size, buf.added) == (2, 5, 7)
    assert list(check_consistent(buf.gather(np.arange(5)))) == [6, 7, 3, 4, 5]
    add_rows(buf, [8, 9, 10, 11, 12])  # exactly capacity: overwrites everything
    assert (buf.pos, buf.size, buf.added) == (2, 5, 12)
    assert sorted(check_consistent(buf.gather(np.arange(5)))) == [8, 9, 10, 11, 12]


def test_sampling_only_uses_filled_rows():
    buf = ReplayBuffer(SPEC, capacity=100)
    add_rows(buf, list(range(1, 8)))
    ts = check_consistent(buf.sample(3000, np.random.default_rng(3)))
    assert ts.min() >= 1 and ts.max() <= 7  # no unwritten (all-zero, id 0) row
    assert set(ts) == set(range(1, 8))


def test_sampling_is_reproducible_per_generator_seed():
    buf = ReplayBuffer(SPEC, capacity=100)
    add_rows(buf, list(range(1, 41)))
    a = decode(buf.sample(64, np.random.default_rng(42)))
    b = decode(buf.sample(64, np.random.default_rng(42)))
    c = decode(buf.sample(64, np.random.default_rng(43)))
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    # the buffer holds no random state of its own: one generator, two draws, differ
    rng = np.random.default_rng(42)
    d1, d2 = decode(buf.sample(64, rng)), decode(buf.sample(64, rng))
    np.testing.assert_array_equal(d1, a)
    assert not np.array_equal(d1, d2)


@pytest.mark.parametrize("capacity,n_rows", [(20, 20), (20, 33), (50, 20)])
def test_sampling_is_roughly_uniform(capacity, n_rows):
    buf = ReplayBuffer(SPEC, capacity=capacity)
    for start in range(1, n_rows + 1, 5):
        add_rows(buf, list(range(start, min(start + 5, n_rows + 1))))
    size = min(capacity, n_rows)
    draws = 20 * 1000
    ts = decode(buf.sample(draws, np.random.default_rng(7)))
    live = list(range(n_rows - size + 1, n_rows + 1))
    counts = np.array([(ts == t).sum() for t in live])
    assert counts.sum() == draws  # every draw is one of the rows still held
    exp = draws / size
    chi2 = float(((counts - exp) ** 2 / exp).sum())
    assert chi2 < 43.8, (chi2, counts)  # chi-square, 19 dof, p = 0.001


def test_sample_empty_raises():
    buf = ReplayBuffer(SPEC, capacity=10)
    with pytest.raises(ValueError, match="empty"):
        buf.sample(4, np.random.default_rng(0))


def test_add_more_than_capacity_raises_and_leaves_buffer_unchanged():
    buf = ReplayBuffer(SPEC, capacity=4)
    add_rows(buf, [1, 2, 3])
    before = {f: getattr(buf, f).copy() for f in FIELDS}
    with pytest.raises(ValueError, match="capacity"):
        add_rows(buf, [4, 5, 6, 7, 8])
    assert (buf.pos, buf.size, buf.added) == (3, 3, 3)
    for f in FIELDS:
        np.testing.assert_array_equal(getattr(buf, f), before[f])


@pytest.mark.parametrize("n_rows", [7, 13])  # partly filled, and wrapped around
def test_state_dict_round_trip(n_rows):
    src = ReplayBuffer(SPEC, capacity=10)
    for start in range(1, n_rows + 1, 3):
        add_rows(src, list(range(start, min(start + 3, n_rows + 1))))
    dst = ReplayBuffer(SPEC, capacity=10)
    dst.load_state_dict(src.state_dict())
    assert (dst.pos, dst.size, dst.added) == (src.pos, src.size, src.added)
    idx = np.arange(src.size)
    a, b = src.gather(idx), dst.gather(idx)
    for f in FIELDS:
        for ag in SPEC.agents:
            assert torch.equal(getattr(a, f)[ag], getattr(b, f)[ag])
    check_consistent(b)
    # and both continue identically
    add_rows(src, [100, 101, 102])
    add_rows(dst, [100, 101, 102])
    assert (dst.pos, dst.size, dst.added) == (src.pos, src.size, src.added)
    np.testing.assert_array_equal(decode(src.sample(32, np.random.default_rng(5))),
                                  decode(dst.sample(32, np.random.default_rng(5))))


def test_load_state_dict_rejects_too_many_rows():
    src = ReplayBuffer(SPEC, capacity=10)
    add_rows(src, list(range(1, 9)))
    with pytest.raises(ValueError, match="capacity"):
        ReplayBuffer(SPEC, capacity=5).load_state_dict(src.state_dict())


def test_state_dict_is_a_snapshot():
    buf = ReplayBuffer(SPEC, capacity=4)
    add_rows(buf, [1, 2, 3, 4])
    sd = buf.state_dict()
    saved = sd["rewards"].copy()
    add_rows(buf, [5, 6])
    np.testing.assert_array_equal(sd["rewards"], saved)


def test_load_full_buffer_into_larger_capacity():
    src = ReplayBuffer(SPEC, capacity=4)
    add_rows(src, [1, 2, 3])
    add_rows(src, [4, 5, 6])  # rows hold 5, 6, 3, 4; pos 2
    dst = ReplayBuffer(SPEC, capacity=6)
    dst.load_state_dict(src.state_dict())
    add_rows(dst, [7])
    held = decode(dst.gather(np.arange(dst.size)))
    assert sorted(held) == [3, 4, 5, 6, 7]


def test_nbytes():
    buf = ReplayBuffer(SPEC, capacity=10)
    obs_w, act_w = 3 + 11, 3 + 5
    assert buf.nbytes == 10 * 4 * (2 * obs_w + act_w + 3 * 2)  # rewards, terminated, alive
