"""Which drone goes to which point of the next formation: a collision-free matching.

For points A (now) and B (next), `match` returns the permutation such that, for every pair
(i, j), (A_i - A_j) . (B_i - B_j) >= 0 or the pair never comes within `limit` on straight-line
paths: a k-d split matching, then swaps in batches of disjoint pairs (each lowers the total
squared path length, so the repair ends). Every pair that could come that close is listed
through k-d trees (`candidate_pairs`, exact, a few per drone), all in numpy. `Cycles` gives the
powers of the permutation one loop of the show applies. Used by the show (`model.py`).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__ = ["LEAF", "NEAR", "Cycles", "candidate_pairs", "crossing_pairs", "match", "near_pairs"]

F64 = npt.NDArray[np.float64]
Index = npt.NDArray[np.intp]

# Split directions for the k-d trees: the axes, the face and the body diagonals.
_DIRECTIONS = np.array(
    [(1, 0, 0), (0, 1, 0), (0, 0, 1), (1, 1, 0), (1, -1, 0), (0, 1, 1), (0, 1, -1), (1, 0, 1),
     (1, 0, -1), (1, 1, 1), (1, 1, -1), (1, -1, 1), (1, -1, -1)], dtype=np.float64,
)  # fmt: skip
_DIRECTIONS /= np.linalg.norm(_DIRECTIONS, axis=1)[:, None]
LEAF = 4  # k-d leaves: at most this many drones
NEAR = 4.0  # the repair re-checks pairs within NEAR * limit of each other at start or end


def _runs(node: Index) -> Index:
    """Where the runs of equal values of the nondecreasing `node` start."""
    return np.flatnonzero(np.r_[True, node[1:] != node[:-1]])


def _directions(pa: F64, pb: F64, starts: Index) -> tuple[F64, F64, Index]:
    """Per node (rows from `starts[k]`), the split direction along which both the starts (pa)
    and the ends (pb) are spread widest (the least of the two spreads, then their sum); and
    every row projected on every direction."""
    qa, qb = pa @ _DIRECTIONS.T, pb @ _DIRECTIONS.T
    sa = np.maximum.reduceat(qa, starts) - np.minimum.reduceat(qa, starts)
    sb = np.maximum.reduceat(qb, starts) - np.minimum.reduceat(qb, starts)
    return qa, qb, np.argmax(np.minimum(sa, sb) + 0.1 * (sa + sb), axis=1)


def _split(node: Index, pa: F64, pb: F64) -> tuple[Index, Index, Index, F64, F64]:
    """One level of a k-d tree whose rows are grouped by the nondecreasing `node`: where each
    node's rows start and how many there are, each row's node (`seg`), and each row's start
    (pa) and end (pb) projected on its node's split direction (`_directions`)."""
    starts = _runs(node)
    sizes = np.diff(np.r_[starts, len(node)])
    seg = np.repeat(np.arange(len(starts)), sizes)
    qa, qb, direction = _directions(pa, pb, starts)
    rows, ax = np.arange(len(node)), direction[seg]
    return starts, sizes, seg, qa[rows, ax], qb[rows, ax]


def _kd_match(a: F64, b: F64) -> Index:
    """A first assignment a[i] -> b[out[i]], built level by level (all nodes of a level at
    once): split both sets at the same count along the node's direction (`_directions`);
    leaves are matched in order along theirs. Pairs split apart keep their order along that
    direction at both ends."""
    n = len(a)
    out = np.empty(n, dtype=np.intp)
    oa, ob = np.arange(n), np.arange(n)
    node = np.zeros(n, dtype=np.intp)
    while len(oa):
        starts, sizes, seg, ka, kb = _split(node, a[oa], b[ob])
        oa = oa[np.lexsort((ka, seg))]
        ob = ob[np.lexsort((kb, seg))]
        pos, size = np.arange(len(oa)) - starts[seg], sizes[seg]
        leaf = size <= LEAF
        out[oa[leaf]] = ob[leaf]
        node = (2 * seg + (pos >= size // 2))[~leaf]
        oa, ob = oa[~leaf], ob[~leaf]
    return out


def _expand(first: Index, count: Index) -> Index:
    """The runs first[k], first[k] + 1, ..., count[k] of them, concatenated."""
    return np.repeat(first - np.cumsum(count) + count, count) + np.arange(int(count.sum()))


def candidate_pairs(a: F64, b: F64, limit: float, *, moving: bool = True) -> Index:
    """Every pair (i, j) that can come closer than `limit` during the straight-line morph
    a[i] -> b[i] (all drones on one schedule), and some more: (m, 2), maybe repeated.

    A k-d tree over the drones (split at the median of a along the node's direction u): at a
    split, a drone i left and j right have (a_j - a_i).u >= 0. Their gap along u at morph
    fraction s is (1 - s)(a_j - a_i).u + s(b_j - b_i).u >= min of the two, so they can come
    closer than `limit` only if (a_j - a_i).u < limit or (b_j - b_i).u < limit: the two
    sorted searches below list exactly those; leaves list all their pairs. No pair is missed,
    so the check is exact for any assignment; the list stays short (a few pairs per drone) when
    the assignment keeps order like `_kd_match`. `moving` False: a = b, the pairs nearer
    than `limit` (and some more)."""
    n = len(a)
    width = 4.0 * float(max(np.abs(a).max(), np.abs(b).max())) + 4.0 * limit + 1.0
    found: list[Index] = []
    order = np.arange(n)
    node = np.zeros(n, dtype=np.intp)
    while len(order):
        starts, sizes, seg, ka, kb = _split(node, a[order], b[order])
        by_a = np.lexsort((ka, seg))
        order, ka, kb = order[by_a], ka[by_a], kb[by_a]
        pos, size = np.arange(len(order)) - starts[seg], sizes[seg]
        small = size <= LEAF
        for k in range(1, LEAF):  # all pairs within a leaf
            p = np.flatnonzero(small & (pos + k < size))
            found.append(np.stack([order[p], order[p + k]], axis=1))
        right = pos >= size // 2
        mid = starts[seg] + size // 2
        left = np.flatnonzero(~small & ~right)
        # near along u at the start: j right with ka_j < ka_i + limit (sorted by node, ka)
        key = seg * width + ka
        count = np.maximum(np.searchsorted(key, key[left] + limit) - mid[left], 0)
        j = _expand(mid[left], count)
        found.append(np.stack([order[np.repeat(left, count)], order[j]], axis=1))
        if not moving:
            node = (2 * seg + right)[~small]
            order = order[~small]
            continue
        # near (or the wrong way round) along u at the end: j right with kb_j < kb_i + limit
        key = (2 * seg + right) * width + kb
        by_b = np.argsort(key, kind="stable")
        end = np.searchsorted(key[by_b], (2 * seg[left] + 1) * width + kb[left] + limit)
        count = np.maximum(end - mid[left], 0)
        j = by_b[_expand(mid[left], count)]
        found.append(np.stack([order[np.repeat(left, count)], order[j]], axis=1))
        node = (2 * seg + right)[~small]
        order = order[~small]
    return np.concatenate(found)


def crossing_pairs(ends: F64, pairs: Index, limit: float) -> tuple[Index, F64]:
    """The `pairs` that come closer than `limit` while moving against each other
    ((a_i - a_j) . (b_i - b_j) < 0; `ends` = a and b stacked as columns, (6, n)), and how
    much swapping their targets shortens the total squared path length (> 0)."""
    d = ends[:, pairs[:, 0]] - ends[:, pairs[:, 1]]
    ab = d[0] * d[3] + d[1] * d[4] + d[2] * d[5]
    against = np.flatnonzero(ab < -1e-9)
    d, ab = d[:, against], ab[against]
    aa = d[0] * d[0] + d[1] * d[1] + d[2] * d[2]
    bb = d[3] * d[3] + d[4] * d[4] + d[5] * d[5]
    # min over s of |(1 - s) da + s db|^2 = (aa bb - ab^2) / |da - db|^2 when ab < 0
    bad = aa * bb - ab * ab < limit * limit * (aa + bb - 2.0 * ab)
    return pairs[against[bad]], -2.0 * ab[bad]


def near_pairs(p: F64, radius: float) -> Index:
    """All pairs of rows of `p` closer than `radius` (each once)."""
    found = candidate_pairs(p, p, radius, moving=False)
    d = p[found[:, 0]] - p[found[:, 1]]
    near: Index = found[np.einsum("ij,ij->i", d, d) < radius * radius]
    return near


def _neighbours(pairs: Index, n: int) -> tuple[Index, Index]:
    """`pairs` as adjacency lists: row r's neighbours are nbrs[ptr[r]:ptr[r + 1]]."""
    both = np.concatenate([pairs, pairs[:, ::-1]])
    both = both[np.argsort(both[:, 0], kind="stable")]
    ptr = np.zeros(n + 1, dtype=np.intp)
    np.cumsum(np.bincount(both[:, 0], minlength=n), out=ptr[1:])
    return ptr, both[:, 1]


def _around(ptr: Index, nbrs: Index, rows: Index) -> tuple[Index, Index]:
    count = ptr[rows + 1] - ptr[rows]
    return np.repeat(rows, count), nbrs[_expand(ptr[rows], count)]


def _swap_batch(bad: Index, gain: F64, out: Index) -> Index:
    """Swap the targets of disjoint pairs of `bad` (the best-gaining pair of each drone
    first, a few passes); the drones swapped."""
    used = np.zeros(len(out), dtype=np.bool_)
    for _ in range(4):
        keep = ~(used[bad[:, 0]] | used[bad[:, 1]])
        bad, gain = bad[keep], gain[keep]
        if not len(bad):
            break
        rank = np.empty(len(bad), dtype=np.intp)
        rank[np.argsort(-gain, kind="stable")] = np.arange(len(bad))
        first = np.full(len(out), len(bad), dtype=np.intp)
        np.minimum.at(first, bad[:, 0], rank)
        np.minimum.at(first, bad[:, 1], rank)
        take = (first[bad[:, 0]] == rank) & (first[bad[:, 1]] == rank)
        i, j = bad[take, 0], bad[take, 1]
        out[i], out[j] = out[j], out[i].copy()
        used[i] = used[j] = True
    return np.flatnonzero(used)


def match(
    a: F64, b: F64, limit: float, near_a: Index | None = None, near_b: Index | None = None
) -> Index:
    """Drone at a[i] flies to b[out[i]]; no pair comes closer than `limit` while moving
    against each other (see the module docstring), for any number of drones.

    `_kd_match`, then rounds of swaps in batches of disjoint pairs (each swap lowers the total
    squared path length, so this ends). A round re-checks only the pairs of the drones just
    swapped with their neighbours at the start (in a) and at the end (in b's slots), plus the
    pairs still bad; when none is left, `candidate_pairs` checks every pair, exactly, and the
    rounds go on with whatever it finds, until it finds nothing. `near_a`/`near_b`:
    `near_pairs(a or b, NEAR * limit)` if known."""
    n = len(a)
    out = _kd_match(a, b)
    radius = NEAR * limit
    ptr_a, nbr_a = _neighbours(near_a if near_a is not None else near_pairs(a, radius), n)
    ptr_b, nbr_b = _neighbours(near_b if near_b is not None else near_pairs(b, radius), n)
    slot_owner = np.empty(n, dtype=np.intp)
    rows = np.arange(n)
    pending = np.empty((0, 2), dtype=np.intp)
    ends = np.empty((6, n))
    ends[:3] = a.T
    moved = np.ones(n, dtype=np.bool_)
    while True:
        while True:
            slot_owner[out] = np.arange(n)
            ends[3:] = b[out].T
            i1, j1 = _around(ptr_a, nbr_a, rows)
            i2, j2 = slot_owner[np.stack(_around(ptr_b, nbr_b, out[rows]))]
            i, j = np.concatenate([i1, i2]), np.concatenate([j1, j2])
            once = ~moved[j] | (i < j)  # a pair of two moved drones: once is enough
            pairs = np.concatenate([np.stack([i[once], j[once]], axis=1), pending])
            bad, gain = crossing_pairs(ends, pairs, limit)
            if not len(bad):
                break
            rows = _swap_batch(bad, gain, out)
            moved[:] = False
            moved[rows] = True
            pending = bad[~(moved[bad[:, 0]] | moved[bad[:, 1]])]
        ends[3:] = b[out].T
        pending, _ = crossing_pairs(ends, candidate_pairs(a, b[out], limit), limit)
        if not len(pending):
            return out
        rows = np.unique(pending)
        moved[:] = False
        moved[rows] = True


class Cycles:
    """Powers of one permutation: `power(L)[i]` = perm applied L times to i (L may be < 0)."""

    def __init__(self, perm: Index) -> None:
        n = len(perm)
        rounds = max(1, int(n).bit_length())  # pointer doubling: 2^rounds >= any cycle
        label, jump = np.arange(n), perm.copy()
        for _ in range(rounds):  # the least member of each drone's cycle
            label = np.minimum(label, label[jump])
            jump = jump[jump]
        # cut each cycle before its least member; steps to the cut, by pointer doubling
        last = perm == label
        nxt = np.where(last, np.arange(n), perm)
        steps = (~last).astype(np.intp)
        for _ in range(rounds):
            steps = steps + steps[nxt]
            nxt = nxt[nxt]
        self.length: Index = np.bincount(label, minlength=n)[label]
        self.pos: Index = self.length - 1 - steps  # the least member is 0, then perm order
        self.order: Index = np.lexsort((self.pos, label))
        self.start: Index = np.searchsorted(label[self.order], label)

    def power(self, times: int) -> Index:
        return self.order[self.start + (self.pos + times) % self.length]
