"""The TF tree of `listen ros2://`: frames composed to the reference frame, checked against
4x4 homogeneous matrices (an independent way to compose), and what it cannot compose named."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from robowire.ros2.decode import Decoded
from robowire.ros2.tf import TfTree


def transforms(*rows: tuple[str, str, list[float], list[float]], stamp: float = 1.0) -> Decoded:
    """(parent, child, translation, rotation w x y z) rows as a decoded TFMessage."""
    return Decoded(
        tuple(r[0] for r in rows),
        tuple(r[1] for r in rows),
        np.full(len(rows), stamp),
        np.array([r[2] for r in rows], dtype=float).reshape(-1, 3),
        np.array([r[3] for r in rows], dtype=float).reshape(-1, 4),
    )


def matrix(translation: list[float], q: list[float]) -> np.ndarray:
    w, x, y, z = np.asarray(q) / np.linalg.norm(q)
    m = np.eye(4)
    m[:3, :3] = [
        [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
        [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
        [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
    ]
    m[:3, 3] = translation
    return m


def pose_matrix(tree_poses: object, frame: str) -> np.ndarray:
    row = tree_poses.frames.index(frame)  # type: ignore[attr-defined]
    return matrix(tree_poses.position[row], tree_poses.orientation[row])  # type: ignore[attr-defined]


QUARTER_Z = [math.cos(math.pi / 4), 0.0, 0.0, math.sin(math.pi / 4)]
IDENTITY = [1.0, 0.0, 0.0, 0.0]


def test_a_chain_composes_to_world() -> None:
    tree = TfTree()
    tree.take(transforms(("world", "a", [1, 0, 0], QUARTER_Z), ("a", "b", [1, 0, 0], IDENTITY)))
    poses = tree.poses()
    assert set(poses.frames) == {"a", "b"}
    b = poses.frames.index("b")
    np.testing.assert_allclose(poses.position[b], [1, 1, 0], atol=1e-12)
    np.testing.assert_allclose(poses.orientation[b], QUARTER_Z, atol=1e-12)
    assert tree.poses().frames == ()  # nothing moved since


quaternions = st.lists(st.floats(-1, 1), min_size=4, max_size=4).filter(
    lambda q: np.linalg.norm(q) > 0.1
)
translations = st.lists(st.floats(-100, 100), min_size=3, max_size=3)


@given(st.lists(st.tuples(translations, quaternions), min_size=1, max_size=5))
def test_any_chain_equals_the_matrix_product(chain: list[tuple[list[float], list[float]]]) -> None:
    tree = TfTree()
    names = ["world"] + [f"f{i}" for i in range(len(chain))]
    rows = [
        (names[i], names[i + 1], t, list(np.asarray(q) / np.linalg.norm(q)))
        for i, (t, q) in enumerate(chain)
    ]
    tree.take(transforms(*reversed(rows)))  # children before parents: order does not matter
    expected = np.eye(4)
    for t, q in chain:
        expected = expected @ matrix(t, q)
    np.testing.assert_allclose(pose_matrix(tree.poses(), names[-1]), expected, atol=1e-9)


def test_another_reference_frame_goes_through_its_inverse() -> None:
    tree = TfTree("odom")
    tree.take(
        transforms(("map", "odom", [2, 3, 0], QUARTER_Z), ("map", "base_link", [5, 3, 1], IDENTITY))
    )
    poses = tree.poses()
    assert set(poses.frames) == {"base_link"}  # map is a root, odom the reference
    expected = np.linalg.inv(matrix([2, 3, 0], QUARTER_Z)) @ matrix([5, 3, 1], IDENTITY)
    np.testing.assert_allclose(pose_matrix(poses, "base_link"), expected, atol=1e-12)


def test_a_parent_moving_moves_its_static_children() -> None:
    tree = TfTree()
    tree.take(transforms(("base", "camera", [0, 0, 1], IDENTITY)))  # /tf_static, once
    tree.take(transforms(("world", "base", [1, 0, 0], IDENTITY)))
    tree.poses()
    tree.take(transforms(("world", "base", [2, 0, 0], IDENTITY), stamp=2.0))
    poses = tree.poses()
    assert set(poses.frames) == {"base", "camera"}
    np.testing.assert_allclose(poses.position[poses.frames.index("camera")], [2, 0, 1])
    assert poses.stamps[poses.frames.index("camera")] == 1.0  # its own transform's stamp


def test_cycles_and_frames_with_no_path_are_named_and_left_out() -> None:
    tree = TfTree()
    tree.take(
        transforms(
            ("world", "robot", [1, 0, 0], IDENTITY),
            ("a", "b", [0, 0, 0], IDENTITY),
            ("b", "a", [0, 0, 0], IDENTITY),
            ("a", "c", [0, 0, 0], IDENTITY),  # hangs below the cycle
            ("odom", "base_link", [0, 0, 0], IDENTITY),  # no path to world (yet)
        )
    )
    assert tree.poses().frames == ("robot",)
    assert tree.cyclic == {"a", "b", "c"}
    assert tree.unrooted == {"base_link"}
    tree.take(transforms(("world", "odom", [0, 1, 0], IDENTITY)))
    poses = tree.poses()
    assert set(poses.frames) == {"odom", "base_link"}
    np.testing.assert_allclose(poses.position[poses.frames.index("base_link")], [0, 1, 0])
    assert tree.unrooted == set()


def test_transforms_tf2_would_refuse_are_named_and_not_taken() -> None:
    tree = TfTree()
    tree.take(
        transforms(
            ("world", "good", [1, 2, 3], IDENTITY),
            ("world", "squashed", [0, 0, 0], [0.5, 0, 0, 0]),
            ("world", "broken", [math.nan, 0, 0], IDENTITY),
            ("world", "world", [0, 0, 0], IDENTITY),
        )
    )
    assert tree.poses().frames == ("good",)
    assert tree.refused == {"squashed", "broken", "world"}
    tree.take(transforms(("world", "squashed", [0, 0, 0], IDENTITY)))
    assert tree.poses().frames == ("squashed",)
    assert "squashed" not in tree.refused


def test_poses_stamped_in_a_frame_are_placed_through_it() -> None:
    tree = TfTree()
    tree.take(transforms(("world", "map", [10, 0, 0], QUARTER_Z)))
    found, where = tree.in_reference(("map", "world", "", "nowhere"))
    assert found.tolist() == [True, True, True, False]
    np.testing.assert_allclose(where.position[0], [10, 0, 0])
    np.testing.assert_allclose(where.orientation[0], QUARTER_Z)
    np.testing.assert_allclose(where.position[1:3], 0.0)


def test_a_thousand_frames_a_sample_are_looked_up_once() -> None:
    tree = TfTree()
    names = tuple(f"body{i}" for i in range(1000))
    sample = Decoded(
        ("world",) * 1000,
        names,
        np.zeros(1000),
        np.arange(3000, dtype=float).reshape(1000, 3),
        np.tile(IDENTITY, (1000, 1)),
    )
    tree.take(sample)
    first = tree.poses()
    tree.take(sample)
    again = tree.poses()
    assert first.frames == again.frames == names
    np.testing.assert_array_equal(again.position, sample.position)
