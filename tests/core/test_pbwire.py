"""`pbwire`, the protobuf wire encoding from columns: varints as the protobuf encoding guide
spells them, and `Heads.join` laying out each device's head and fixed part exactly as
concatenating them one by one would (both ways it has: runs of equal heads, masked padding)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from robowire import pbwire
from robowire.pbwire import Heads, Layout


def test_varints_as_the_encoding_guide_gives_them() -> None:
    # https://protobuf.dev/programming-guides/encoding/: 1 is 01, 150 is 96 01
    assert pbwire.varint(1) == b"\x01" and pbwire.varint(150) == b"\x96\x01"
    assert pbwire.varint(0) == b"\x00" and pbwire.varint(2**32) == b"\x80\x80\x80\x80\x10"
    assert pbwire.field(2, b"testing") == bytes.fromhex("120774657374696e67")  # the guide's


def test_a_layout_is_its_constants_and_doubles_in_order() -> None:
    layout = Layout([b"\x09", "x", b"\x11\x22", "y"])
    rows = layout.fill(2, x=np.array([1.0, 2.0]), y=3.0)
    assert layout.size == 1 + 8 + 2 + 8
    assert (
        rows[1].tobytes()
        == b"\x09" + np.float64(2.0).tobytes() + b"\x11\x22" + np.float64(3.0).tobytes()
    )


@settings(max_examples=200, deadline=None)
@given(
    heads=st.lists(st.binary(min_size=1, max_size=200), min_size=1, max_size=80),
    order=st.randoms(use_true_random=False),
    tail=st.integers(0, 5),
    runs=st.sampled_from([0, pbwire.RUNS]),
)
def test_join_is_each_head_then_its_tail(heads: list[bytes], order, tail: int, runs: int) -> None:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(pbwire, "RUNS", runs)  # 0: always the masked layout
        check_join(heads, order, tail)


def check_join(heads: list[bytes], order, tail: int) -> None:
    joiner = Heads(lambda slot: heads[slot])
    count = order.randint(1, len(heads))
    if order.random() < 0.3:  # a run of slots in order (a whole table): read as a slice
        first = order.randint(0, len(heads) - count)
        slots = np.arange(first, first + count, dtype=np.intp)
    else:
        slots = np.array(order.sample(range(len(heads)), count), np.intp)
    tails = np.arange(len(slots) * tail, dtype=np.uint8).reshape(len(slots), tail)
    for _ in range(2):  # (the second time from what it kept)
        joined, ends = joiner.join(slots, tails)
        expect = [heads[s] + tails[i].tobytes() for i, s in enumerate(slots.tolist())]
        assert joined == b"".join(expect)
        assert ends.tolist() == np.cumsum([len(e) for e in expect]).tolist()


@settings(max_examples=200, deadline=None)
@given(
    heads=st.lists(st.binary(min_size=1, max_size=30), min_size=1, max_size=80),
    order=st.randoms(use_true_random=False),
    runs=st.sampled_from([0, pbwire.RUNS]),
)
def test_messages_laid_out_in_place_are_those_joined(heads: list[bytes], order, runs: int) -> None:
    """`Heads.messages` (kept from call to call) gives what `join` gives with the layout
    filled, for new values each time, the same slots or others."""
    layout = Layout([b"\x09", "x", b"\x11\x22", "y"])
    joiner = Heads(lambda slot: heads[slot])
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(pbwire, "RUNS", runs)  # 0: never kept (heads of many lengths)
        slots = np.zeros(0, np.intp)
        for _ in range(6):
            if not len(slots) or order.random() < 0.5:  # the same slots again, or others
                count = order.randint(1, len(heads))
                slots = np.array(order.sample(range(len(heads)), count), np.intp)
                if order.random() < 0.5:
                    slots.sort()
            x = np.array([order.uniform(-1e9, 1e9) for _ in slots])
            y = order.uniform(-1.0, 1.0)
            joined, ends = joiner.messages(slots, layout, x=x, y=y)
            expect = [
                heads[s] + b"\x09" + np.float64(x[i]).tobytes() + b"\x11\x22"
                + np.float64(y).tobytes()
                for i, s in enumerate(slots.tolist())
            ]  # fmt: skip
            assert joined == b"".join(expect)
            assert ends.tolist() == np.cumsum([len(e) for e in expect]).tolist()
