"""CoinChangeMod routing (TopoOpt NSDI'23, Appendix E.3, Algorithm 4).

On the union of regular rings with generators ("coins") ``C`` over ``n`` ring
positions, position ``i`` reaches ``j`` by adding coins modulo ``n``; the fewest
coins summing to ``(j - i) mod n`` is a minimum-hop path (the topology's links are
exactly the coin moves).  Algorithm 4 computes, for every residue, the coin count
and a back-trace coin by synchronous relaxation (lines 10-19):
``dist[i] = min_c dist[(i - c) mod n] + 1``, the first coin of ``C`` reaching the
minimum kept (strict ``<``, line 15).  The paper initialises ``dist[c] = 0`` for a
coin (counting coins after the first); we set ``dist[c] = 1`` so ``dist`` is the hop
count -- the routes are the same.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from codesign.errors import InfeasibleError, invalid

__all__ = ["CoinTable", "coin_change_table", "coin_change_mod"]

_INF = np.iinfo(np.int64).max // 4


@dataclass(frozen=True)
class CoinTable:
    """Algorithm 4's result for ``n`` positions and coins ``coins``.

    ``dist[v]`` is the fewest coins summing to ``v`` modulo ``n`` (``dist[0] = 0``),
    ``back[v]`` the last coin of such a sum (``curr_bt``; ``back[0] = 0``).
    """

    n: int
    coins: tuple[int, ...]
    dist: np.ndarray
    back: np.ndarray

    def coins_for(self, delta: int) -> list[int]:
        """Coins summing to ``delta`` mod ``n``, in the order they are added (GetRouteSeq)."""
        v = int(delta) % self.n
        out = []
        while v:
            c = int(self.back[v])
            out.append(c)
            v = (v - c) % self.n
        out.reverse()
        return out

    def positions(self, src: int, dst: int) -> list[int]:
        """Positions ``src, src + c1, ..., dst`` (mod ``n``) of the route."""
        path = [int(src) % self.n]
        for c in self.coins_for(dst - src):
            path.append((path[-1] + c) % self.n)
        return path


def coin_change_table(n: int, coins) -> CoinTable:
    """Run Algorithm 4 (CoinChangeMod) for ``n`` positions and the given coins.

    Parameters
    ----------
    n : int
        Ring positions (group size), >= 2.
    coins : sequence of int
        Generators ``1 <= c < n`` (distinct).

    Returns
    -------
    CoinTable

    Raises
    ------
    InvalidSpecError
        Bad ``n`` or coins.
    InfeasibleError
        Some residue is not a sum of coins (all coins share a factor with ``n``).

    Complexity: O(n |C| D) numpy work for diameter D.

    Examples
    --------
    >>> t = coin_change_table(12, [1, 5])
    >>> int(t.dist.max()), t.positions(0, 10)
    (5, [0, 5, 10])
    """
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 2:
        raise invalid("coin_change n", n, "an integer >= 2")
    n = int(n)
    try:
        cs = [int(c) for c in coins]
    except (TypeError, ValueError):
        raise invalid("coin_change coins", coins, "a list of integers") from None
    if not cs or len(set(cs)) != len(cs) or any(not 1 <= c < n for c in cs):
        raise invalid("coin_change coins", coins, f"distinct integers c with 1 <= c < {n}")
    dist = np.full(n, _INF, dtype=np.int64)
    back = np.zeros(n, dtype=np.int64)
    dist[0] = 0
    for c in cs:                       # lines 7-9 (hop count 1, see module docstring)
        if dist[c] > 1:
            dist[c] = 1
            back[c] = c
    while True:                        # lines 10-19
        new_dist = dist.copy()
        new_back = back.copy()
        for c in cs:
            cand = np.roll(dist, c) + 1    # cand[i] = dist[(i - c) mod n] + 1
            better = cand < new_dist
            new_dist[better] = cand[better]
            new_back[better] = c
        if np.array_equal(new_dist, dist):
            break
        dist, back = new_dist, new_back
    if np.any(dist >= _INF):
        v = int(np.flatnonzero(dist >= _INF)[0])
        raise InfeasibleError(f"coins {cs} cannot reach distance {v} modulo {n}: "
                              f"some coin must be co-prime with {n}")
    dist.setflags(write=False)
    back.setflags(write=False)
    return CoinTable(n, tuple(cs), dist, back)


def coin_change_mod(n: int, generators, src: int, dst: int) -> list[int]:
    """Minimum-coin route from ring position ``src`` to ``dst`` (Algorithm 4).

    Returns the positions visited, ``[src, ..., dst]``; map them through the
    group's member list to get servers.

    Examples
    --------
    >>> coin_change_mod(16, [1, 3, 9], 2, 1)     # 15 = 9 + 3 + 3
    [2, 11, 14, 1]
    """
    for name, v in (("src", src), ("dst", dst)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not 0 <= v < n:
            raise invalid(f"coin_change {name}", v, f"a position in 0..{n - 1}")
    return coin_change_table(n, generators).positions(src, dst)
