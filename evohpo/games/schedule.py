"""Cross-play between teams on competitive games: who meets whom, match outcomes, Elo ratings,
and fitness from the matches a member played.

On a competitive game (simple_tag, simple_adversary, ...) each team has its own population of
``n`` members. Each window, members of different teams play evaluation matches on the same
episodes; a match is a tuple of member indices, one per team (the index within its team). A
member's fitness comes only from its own team's returns, since returns of different teams are
not on one scale in a general-sum game. Ratings are Elo ratings per team; an outcome compares
the teams' returns only after each team's returns are standardised over the window's matches.

Pure functions of their arguments: randomness comes in as a ``Generator``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import numpy as np

__all__ = [
    "ELO_START",
    "cross_play_fitness",
    "elo_update",
    "expected",
    "matchups",
    "matrix",
    "outcomes",
    "training_pairs",
]

ELO_START = 1000.0  # every member's rating before its first match
REDRAWS = 100  # tries at a sampled round that repeats no earlier match
TIE = 1e-9  # standardised returns this close are a tie

Match = tuple[int, ...]


def _check_sizes(n: int, teams: int) -> None:
    if n < 1:
        raise ValueError(f"a team needs at least one member, got n={n}")
    if teams < 2:
        raise ValueError(f"cross-play needs at least two teams, got teams={teams}")


def matchups(n: int, teams: int, opponents: int, rng: np.random.Generator) -> list[Match]:
    """The evaluation matches of one window, each a tuple of member indices, one per team.

    ``opponents == 0`` or ``opponents >= n``: round robin, every combination of members in
    ``itertools.product`` order (``n ** teams`` matches; ``rng`` draws nothing). Otherwise
    ``opponents`` rounds of ``n`` matches: each round pairs the teams by independent random
    permutations ``p_t`` (match ``(p_0[i], p_1[i], ...)``), so every member plays exactly
    ``opponents`` matches. A round that repeats an earlier round's match is drawn again, up to
    ``REDRAWS`` times; for two teams a round that repeats nothing always exists (the pairs not
    yet played form a regular bipartite graph, which has a perfect matching) and is found by
    augmenting paths when the redraws fail; for more teams the draw with the fewest repeats is
    kept (rare: a member's possible opponent tuples number ``n ** (teams - 1)``).
    """
    _check_sizes(n, teams)
    if opponents < 0:
        raise ValueError(f"opponents must be >= 0 (0: round robin), got {opponents}")
    if opponents == 0 or opponents >= n:
        return list(itertools.product(range(n), repeat=teams))
    played: set[Match] = set()
    out: list[Match] = []
    for _ in range(opponents):
        fresh = _round(n, teams, played, rng)
        played.update(fresh)
        out += fresh
    return out


def _round(n: int, teams: int, played: set[Match], rng: np.random.Generator) -> list[Match]:
    """One round of ``n`` matches, each member in one, repeating no match of ``played``
    where that can be done."""
    best: tuple[int, list[Match]] | None = None
    for _ in range(REDRAWS):
        perms = [rng.permutation(n) for _ in range(teams)]
        draw = [tuple(int(p[i]) for p in perms) for i in range(n)]
        repeats = sum(m in played for m in draw)
        if repeats == 0:
            return draw
        if best is None or repeats < best[0]:
            best = (repeats, draw)
    if teams == 2:
        return _fresh_pairing(n, played, rng)
    assert best is not None
    return best[1]


def _fresh_pairing(n: int, played: set[Match], rng: np.random.Generator) -> list[Match]:
    """A pairing of two teams' members over pairs not in ``played`` (Kuhn's augmenting paths,
    members tried in random order)."""
    partner = [-1] * n  # team 1's member -> team 0's member
    tries = [rng.permutation(n) for _ in range(n)]  # team 0's member -> team 1's, in order

    def augment(a: int, seen: list[bool]) -> bool:
        for b in map(int, tries[a]):
            if seen[b] or (a, b) in played:
                continue
            seen[b] = True
            if partner[b] < 0 or augment(partner[b], seen):
                partner[b] = a
                return True
        return False

    for a in map(int, rng.permutation(n)):
        if not augment(a, [False] * n):
            raise RuntimeError("no pairing repeats no earlier match")  # played is not regular
    return [(partner[b], b) for b in map(int, rng.permutation(n))]


def training_pairs(n: int, teams: int, generation: int) -> list[Match]:
    """Who plays whom in the training envs during window ``generation``: ``n`` slots, slot
    ``i`` holding team 0's member ``i`` and team ``t``'s member ``(i + t * generation) % n``.

    Each member of each team is in exactly one slot. The rotation walks team 1 past team 0, so
    over ``n`` successive windows each member of either meets every member of the other; with
    more teams, team ``t`` meets all of team 0 when ``t`` and ``n`` share no factor.
    """
    _check_sizes(n, teams)
    if generation < 0:
        raise ValueError(f"generation must be >= 0, got {generation}")
    return [tuple([i] + [(i + t * generation) % n for t in range(1, teams)]) for i in range(n)]


def _as_returns(team_returns: np.ndarray, matches: int | None = None) -> np.ndarray:
    x = np.asarray(team_returns, dtype=float)
    if x.ndim != 2 or x.shape[1] < 2:
        raise ValueError(f"team returns must have shape [matches, teams >= 2], got {x.shape}")
    if matches is not None and x.shape[0] != matches:
        raise ValueError(f"{matches} matches but team returns for {x.shape[0]}")
    if not np.isfinite(x).all():
        raise ValueError("team returns must be finite")
    return x


def outcomes(team_returns: np.ndarray) -> np.ndarray:
    """Each team's score in each match, from ``team_returns`` of shape ``[matches, teams]``
    (each team's mean return in each match); scores of a match sum to 1.

    Teams' returns are not on one scale, so each team's column is first standardised over the
    window's matches (``z = (x - mean) / std``; a constant column is all zeros). A team's score
    is its share of the pairwise contests of the match: against each other team it wins 1 for a
    larger ``z``, 0.5 for a tie (within ``TIE``), 0 for a smaller one, and the total is divided
    by ``teams * (teams - 1) / 2``. For two teams: 1 / 0, or 0.5 each; for more, without ties,
    the team ranked ``r`` (0: largest ``z``) scores ``(teams - 1 - r) / (teams * (teams - 1) /
    2)``, i.e. ``(teams - 1 - r) / (teams - 1)`` normalised to sum to 1.
    """
    x = _as_returns(team_returns)
    if len(x) == 0:
        return np.zeros(x.shape)
    spread = np.ptp(x, axis=0) > 0
    std = np.where(spread, x.std(axis=0), 1.0)
    z = np.where(spread, (x - x.mean(axis=0)) / std, 0.0)
    diff = z[:, :, None] - z[:, None, :]  # [match, team, other team]
    points = (diff > TIE) + 0.5 * (np.abs(diff) <= TIE)
    teams = x.shape[1]
    points[:, np.arange(teams), np.arange(teams)] = 0.0  # a team does not play itself
    return points.sum(axis=2) / (teams * (teams - 1) / 2)


def expected(ra: float, rb: float) -> float:
    """Elo's expected score of a player rated ``ra`` against one rated ``rb``."""
    return 1.0 / (1.0 + 10.0 ** ((rb - ra) / 400.0))


def _check_matches(matches: Sequence[Match], sizes: Sequence[int]) -> None:
    for m in matches:
        if len(m) != len(sizes):
            raise ValueError(f"match {m} does not name one member of each of {len(sizes)} teams")
        if any(not 0 <= i < size for i, size in zip(m, sizes, strict=True)):
            raise ValueError(f"match {m} names a member outside its team (sizes {list(sizes)})")


def elo_update(ratings: list[np.ndarray], matches: Sequence[Match], scores: np.ndarray,
               k: float) -> list[np.ndarray]:
    """The ratings after one window of matches, all applied at once; ``ratings[t][i]`` is team
    ``t``'s member ``i``'s rating, and ``scores`` is :func:`outcomes`' ``[matches, teams]``.

    Every expectation uses the ratings from before the window; a member's change is the sum
    over its matches of ``k * (score - expected score)``. For two teams team 0's expected score
    is ``expected(r0, r1)``. For more teams it is the team's expected share of the pairwise
    contests, ``sum(expected(r_t, r_u) for u != t) / (teams * (teams - 1) / 2)``, on the scale
    of the scores (which sum to 1 per match), so that equal ratings expect equal shares and the
    ratings' total does not drift. Returns new arrays; the inputs are unchanged.
    """
    before = [np.asarray(r, dtype=float) for r in ratings]
    teams = len(before)
    if teams < 2:
        raise ValueError(f"cross-play needs at least two teams, got {teams} rating arrays")
    if any(r.ndim != 1 for r in before):
        raise ValueError("each team's ratings must be a 1-d array, one rating per member")
    s = np.asarray(scores, dtype=float)
    if s.shape != (len(matches), teams):
        raise ValueError(f"scores must have shape {(len(matches), teams)}, got {s.shape}")
    _check_matches(matches, [len(r) for r in before])
    pairs = teams * (teams - 1) / 2
    after = [r.copy() for r in before]
    for m, members in enumerate(matches):
        r = [before[t][i] for t, i in enumerate(members)]
        for t, i in enumerate(members):
            e = sum(expected(r[t], r[u]) for u in range(teams) if u != t) / pairs
            after[t][i] += k * (s[m, t] - e)
    return after


def cross_play_fitness(matches: Sequence[Match], team_returns_per_match: np.ndarray, n: int,
                       teams: int) -> list[np.ndarray]:
    """Each team's members' fitness: the mean of the member's own team's return over the
    matches it played (NaN for a member that played none). Other teams' returns are unused."""
    _check_sizes(n, teams)
    x = _as_returns(team_returns_per_match, len(matches))
    if x.shape[1] != teams:
        raise ValueError(f"{teams} teams but team returns for {x.shape[1]}")
    _check_matches(matches, [n] * teams)
    idx = np.asarray(matches, dtype=int).reshape(len(matches), teams)
    out = []
    for t in range(teams):
        total = np.bincount(idx[:, t], weights=x[:, t], minlength=n)
        count = np.bincount(idx[:, t], minlength=n)
        out.append(np.divide(total, count, out=np.full(n, math.nan), where=count > 0))
    return out


def matrix(matches: Sequence[Match], team_returns: np.ndarray, n: int,
           team: int = 0) -> np.ndarray:
    """Two teams' cross-play table, shape ``[n, n]``: entry ``[i, j]`` is team ``team``'s
    return (raw, not standardised) when team 0's member ``i`` met team 1's member ``j``.

    Rows are always team 0's members and columns team 1's, for either ``team``, so the two
    teams' tables line up entry by entry. A pair that met more than once gets its mean; a pair
    that did not meet is NaN.
    """
    x = _as_returns(team_returns, len(matches))
    if x.shape[1] != 2:
        raise ValueError(f"a cross-play table is for two teams, got returns for {x.shape[1]}")
    if team not in (0, 1):
        raise ValueError(f"team must be 0 or 1, got {team}")
    _check_matches(matches, [n, n])
    total = np.zeros((n, n))
    count = np.zeros((n, n))
    for (i, j), ret in zip(matches, x[:, team], strict=True):
        total[i, j] += ret
        count[i, j] += 1
    return np.divide(total, count, out=np.full((n, n), math.nan), where=count > 0)
