"""Cross-play between teams: schedules, outcomes, Elo and fitness, on answers known by hand."""

from __future__ import annotations

import itertools
from collections import Counter

import numpy as np
import pytest

from evohpo.games.schedule import (
    ELO_START,
    cross_play_fitness,
    elo_update,
    expected,
    matchups,
    matrix,
    outcomes,
    training_pairs,
)


def plays(matches: list[tuple[int, ...]], teams: int) -> list[Counter[int]]:
    """How many matches each member of each team is in."""
    return [Counter(m[t] for m in matches) for t in range(teams)]


# schedules

@pytest.mark.parametrize("opponents", [0, 4, 9])
def test_round_robin_plays_every_pair_once_and_draws_nothing(opponents: int) -> None:
    rng = np.random.default_rng(0)
    state = rng.bit_generator.state
    matches = matchups(4, 2, opponents, rng)
    assert matches == list(itertools.product(range(4), repeat=2))
    assert Counter(matches) == Counter({(i, j): 1 for i in range(4) for j in range(4)})
    assert rng.bit_generator.state == state


def test_round_robin_of_three_teams() -> None:
    matches = matchups(3, 3, 0, np.random.default_rng(0))
    assert len(matches) == 27 and len(set(matches)) == 27


@pytest.mark.parametrize(("n", "teams", "opponents"),
                         [(8, 2, 1), (8, 2, 3), (8, 2, 7), (5, 2, 4), (2, 2, 1), (6, 3, 5),
                          (4, 4, 3)])
@pytest.mark.parametrize("seed", range(5))
def test_sampled_schedule_is_balanced_and_repeats_no_match(n: int, teams: int, opponents: int,
                                                           seed: int) -> None:
    matches = matchups(n, teams, opponents, np.random.default_rng(seed))
    assert len(matches) == n * opponents
    for counts in plays(matches, teams):
        assert counts == Counter({i: opponents for i in range(n)})
    for r in range(opponents):  # each round holds every member once
        rnd = matches[r * n:(r + 1) * n]
        assert all(sorted(m[t] for m in rnd) == list(range(n)) for t in range(teams))
    assert len(set(matches)) == len(matches)
    if teams == 2:  # two teams: every member meets `opponents` different members
        for i in range(n):
            assert len({m[1] for m in matches if m[0] == i}) == opponents


def test_sampled_schedule_is_reproducible_for_a_seed_and_differs_for_another() -> None:
    a = matchups(8, 2, 3, np.random.default_rng(7))
    assert a == matchups(8, 2, 3, np.random.default_rng(7))
    assert a != matchups(8, 2, 3, np.random.default_rng(8))


@pytest.mark.parametrize(("n", "teams", "opponents", "message"),
                         [(0, 2, 1, "at least one member"), (4, 1, 1, "two teams"),
                          (4, 2, -1, "opponents")])
def test_matchups_rejects_bad_arguments(n: int, teams: int, opponents: int,
                                        message: str) -> None:
    with pytest.raises(ValueError, match=message):
        matchups(n, teams, opponents, np.random.default_rng(0))


def test_training_pairs_rotate_through_every_opponent() -> None:
    n = 5
    met: set[tuple[int, ...]] = set()
    for g in range(n):
        slots = training_pairs(n, 2, g)
        assert len(slots) == n
        for counts in plays(slots, 2):
            assert counts == Counter(range(n))
        met |= set(slots)
    assert met == set(itertools.product(range(n), repeat=2))
    assert training_pairs(n, 2, 0) == [(i, i) for i in range(n)]
    assert training_pairs(n, 2, n + 2) == training_pairs(n, 2, 2)


def test_training_pairs_of_three_teams() -> None:
    assert training_pairs(5, 3, 1) == [(0, 1, 2), (1, 2, 3), (2, 3, 4), (3, 4, 0), (4, 0, 1)]
    for t in (1, 2):  # 5 is prime: each team meets all of team 0 in 5 windows
        met = {(s[0], s[t]) for g in range(5) for s in training_pairs(5, 3, g)}
        assert len(met) == 25
    with pytest.raises(ValueError, match="generation"):
        training_pairs(5, 2, -1)


# outcomes

def test_outcomes_of_a_zero_sum_game() -> None:
    x = np.array([3.0, -1.0, 0.0, 2.0])
    scores = outcomes(np.stack([x, -x], axis=1))
    # mean 1, so z of team 0 is positive for 3 and 2, negative for -1 and 0
    assert scores.tolist() == [[1, 0], [0, 1], [0, 1], [1, 0]]


def test_outcomes_standardise_each_team_on_its_own_scale() -> None:
    # team 1's returns are huge but its relative standing is what counts
    returns = np.array([[1.0, 1000.0], [2.0, 900.0], [3.0, 1100.0]])
    # z0 = (-1.22, 0, 1.22), z1 = (0, -1.22, 1.22): match 1 goes to team 0, match 2 is a tie
    assert outcomes(returns).tolist() == [[0, 1], [1, 0], [0.5, 0.5]]


def test_outcomes_tie_and_constant_column() -> None:
    assert outcomes(np.array([[1.0, 5.0], [1.0, 5.0]])).tolist() == [[0.5, 0.5]] * 2
    # team 1 constant: its z is 0, so team 0 wins where it is above its mean
    scores = outcomes(np.array([[1.0, 2.0], [3.0, 2.0], [2.0, 2.0]]))
    assert scores.tolist() == [[0, 1], [1, 0], [0.5, 0.5]]


def test_outcomes_of_three_teams_are_rank_shares() -> None:
    returns = np.array([[1.0, 0.0, -1.0], [-1.0, 0.0, 1.0], [0.0, 0.0, 0.0]])
    scores = outcomes(returns)
    # z per column: team 0 (1.22, -1.22, 0), team 1 all 0, team 2 (-1.22, 1.22, 0)
    np.testing.assert_allclose(scores, [[2 / 3, 1 / 3, 0], [0, 1 / 3, 2 / 3], [1 / 3] * 3])
    np.testing.assert_allclose(scores.sum(axis=1), 1.0)


def test_outcomes_reject_bad_returns() -> None:
    with pytest.raises(ValueError, match="shape"):
        outcomes(np.zeros((3, 1)))
    with pytest.raises(ValueError, match="finite"):
        outcomes(np.array([[1.0, np.nan]]))
    assert outcomes(np.zeros((0, 2))).shape == (0, 2)


# Elo

def test_expected_score() -> None:
    assert expected(1000, 1000) == 0.5
    assert expected(1400, 1000) == pytest.approx(10 / 11)  # 400 points: odds of 10 to 1
    assert expected(1000, 1400) + expected(1400, 1000) == pytest.approx(1.0)


def test_elo_textbook_example() -> None:
    """A player rated 1613 scores 2.5 of 5 against 1609, 1477, 1388, 1586 and 1720 (K = 32):
    expected 0.51 + 0.69 + 0.79 + 0.54 + 0.35 = 2.88 to two places, 2.8666 exactly, so it
    loses 11.7 points (12 with the rounded expectations) and is rated 1601."""
    opponents = np.array([1609.0, 1477.0, 1388.0, 1586.0, 1720.0])
    ratings = [np.array([1613.0]), opponents.copy()]
    matches = [(0, j) for j in range(5)]
    team0 = np.array([0.0, 0.5, 1.0, 1.0, 0.0])  # loss, draw, win, win, loss
    scores = np.stack([team0, 1 - team0], axis=1)
    exp = [expected(1613, r) for r in opponents]
    assert [round(e, 2) for e in exp] == [0.51, 0.69, 0.79, 0.54, 0.35]
    new = elo_update(ratings, matches, scores, k=32)
    assert new[0][0] == pytest.approx(1613 + 32 * (2.5 - sum(exp)))
    assert new[0][0] == pytest.approx(1601.27, abs=0.01) and round(new[0][0]) == 1601
    # each opponent moves by the opposite of its one match's change to the player
    np.testing.assert_allclose(new[1] - opponents, -32 * (team0 - np.array(exp)))
    assert ratings[0][0] == 1613.0 and ratings[1].tolist() == opponents.tolist()  # unchanged


def test_elo_applies_a_window_at_once() -> None:
    """Two wins in one window are both scored against the ratings from before it: +16 each."""
    ratings = [np.array([1000.0]), np.array([1000.0, 1000.0])]
    new = elo_update(ratings, [(0, 0), (0, 1)], np.array([[1.0, 0.0], [1.0, 0.0]]), k=32)
    assert new[0].tolist() == [1032.0] and new[1].tolist() == [984.0, 984.0]


def test_elo_round_robin_conserves_the_total() -> None:
    rng = np.random.default_rng(3)
    n = 4
    ratings = [np.full(n, ELO_START), np.full(n, ELO_START)]
    for _ in range(5):
        matches = matchups(n, 2, 0, rng)
        scores = outcomes(rng.normal(size=(len(matches), 2)))
        ratings = elo_update(ratings, matches, scores, k=24)
        assert ratings[0].sum() + ratings[1].sum() == pytest.approx(2 * n * ELO_START)
    assert not np.allclose(ratings[0], ELO_START)


def test_elo_of_three_teams_conserves_the_total_and_equal_ratings_expect_equal_shares() -> None:
    ratings = [np.full(2, ELO_START) for _ in range(3)]
    matches = matchups(2, 3, 0, np.random.default_rng(0))
    tied = elo_update(ratings, matches, np.full((len(matches), 3), 1 / 3), k=32)
    np.testing.assert_allclose(np.concatenate(tied), ELO_START)
    scores = outcomes(np.random.default_rng(1).normal(size=(len(matches), 3)))
    new = elo_update(ratings, matches, scores, k=32)
    assert sum(r.sum() for r in new) == pytest.approx(6 * ELO_START)


def test_the_strongest_member_ends_highest_rated() -> None:
    rng = np.random.default_rng(11)
    n = 6
    skill0 = np.array([3.0, 0.0, 0.5, -0.5, 1.0, 0.2])  # member 0 beats every opponent
    skill1 = rng.normal(scale=0.5, size=n)
    ratings = [np.full(n, ELO_START), np.full(n, ELO_START)]
    for _ in range(6):
        matches = matchups(n, 2, 3, rng)
        margin = np.array([skill0[i] - skill1[j] for i, j in matches])
        margin += rng.normal(scale=0.3, size=len(matches))
        returns = np.stack([margin, -margin], axis=1)  # zero-sum
        ratings = elo_update(ratings, matches, outcomes(returns), k=32)
    assert int(np.argmax(ratings[0])) == 0
    assert ratings[0][0] > ELO_START > ratings[0][3]


def test_elo_update_rejects_mismatched_arguments() -> None:
    ratings = [np.full(2, ELO_START), np.full(2, ELO_START)]
    with pytest.raises(ValueError, match="shape"):
        elo_update(ratings, [(0, 1)], np.zeros((2, 2)), k=32)
    with pytest.raises(ValueError, match="outside"):
        elo_update(ratings, [(0, 2)], np.zeros((1, 2)), k=32)
    with pytest.raises(ValueError, match="one member of each"):
        elo_update(ratings, [(0,)], np.zeros((1, 2)), k=32)


# fitness and the cross-play table

def test_cross_play_fitness_is_the_mean_own_team_return() -> None:
    matches = [(0, 0), (0, 1), (1, 1), (2, 1)]
    returns = np.array([[1.0, 10.0], [3.0, 20.0], [5.0, 30.0], [7.0, 40.0]])
    f0, f1 = cross_play_fitness(matches, returns, n=3, teams=2)
    assert f0.tolist() == [2.0, 5.0, 7.0]
    assert f1[:2].tolist() == [10.0, 30.0] and np.isnan(f1[2])  # team 1's member 2 idle
    other = returns.copy()
    other[:, 1] = [-5.0, 0.0, 1e6, 3.0]  # the other team's returns do not count
    np.testing.assert_array_equal(cross_play_fitness(matches, other, n=3, teams=2)[0], f0)


def test_cross_play_fitness_checks_its_arguments() -> None:
    with pytest.raises(ValueError, match="matches"):
        cross_play_fitness([(0, 0)], np.zeros((2, 2)), n=2, teams=2)
    with pytest.raises(ValueError, match="teams"):
        cross_play_fitness([(0, 0)], np.zeros((1, 3)), n=2, teams=2)


def test_matrix_holds_raw_returns_with_nan_for_pairs_that_did_not_meet() -> None:
    matches = [(0, 0), (0, 1), (1, 1), (0, 1)]
    returns = np.array([[1.0, -1.0], [2.0, -2.0], [3.0, -3.0], [4.0, -4.0]])
    m0 = matrix(matches, returns, 2)
    m1 = matrix(matches, returns, 2, team=1)
    np.testing.assert_array_equal(m0, [[1.0, 3.0], [np.nan, 3.0]])  # (0, 1) met twice: mean
    np.testing.assert_array_equal(m1, -m0)  # rows are team 0's members for either team
    with pytest.raises(ValueError, match="two teams"):
        matrix([(0, 0, 0)], np.zeros((1, 3)), 2)
    with pytest.raises(ValueError, match="team must be"):
        matrix(matches, returns, 2, team=2)
