"""Bad arguments to the evaluators' public functions raise one-line InvalidSpecError.

A fuzzing pass found bare TypeError / AttributeError / ValueError / OverflowError /
MemoryError, a hang (NaN capacity in max-min filling) and silent truncation (NPU id 0.5
read as 0).  Every case here must raise :class:`~codesign.errors.InvalidSpecError` whose
message is one line naming the field; valid inputs keep their answers.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from codesign.errors import InvalidSpecError
from evaluators.collectives import Collective
from topologies.families.clos import MAX_NODES


def _refused(fn, *args, match: str = "", **kwargs) -> str:
    with pytest.raises(InvalidSpecError, match=match) as info:
        fn(*args, **kwargs)
    text = str(info.value)
    assert "\n" not in text and len(text) < 400, text
    return text


# ------------------------------------------------------------------ collectives
@pytest.mark.parametrize("npus, needle", [
    (None, "collective NPUs None"),
    (4.0, "collective NPUs 4.0"),
    ("abcd", "collective NPUs 'abcd'"),
    ([None, 1], r"collective participants \[None, 1\]"),
    ([[0], [1]], "collective participants"),
    ([0.5, 1.5], r"collective participants \[0.5, 1.5\]"),       # int() truncated them
    (np.array([0.0, 1.0]), "collective participants"),
    ([0, -1], "collective participants"),
    ([0, MAX_NODES], "collective participants"),
    (10 ** 12, f"collective NPU count 1000000000000: expected an integer in "
               rf"\[2, {MAX_NODES}\]"),                          # was a MemoryError
    (1, "collective NPU count 1"),
    (True, "collective NPUs True"),
    (range(10 ** 30), "collective participants"),
    ([0, 1, 1], "distinct NPU ids"),
])
def test_collective_npus_refused(npus, needle):
    _refused(Collective.on, "allgather", npus, 1e6, match=needle)


@pytest.mark.parametrize("size", ["1GB", "4096", None, [1], 1j, np.array([1.0]), 10 ** 400,
                                  math.nan, math.inf, 0, -1.0, True])
def test_collective_size_refused(size):
    _refused(Collective.on, "allreduce", 4, size, match="invalid collective size")


@pytest.mark.parametrize("chunks", [None, math.nan, math.inf, [2], 0, 2.5, "2", True])
def test_collective_chunks_refused(chunks):
    _refused(Collective.on, "allreduce", 4, 1e6, chunks_per_npu=chunks,
             match="invalid chunks per NPU")


@pytest.mark.parametrize("root", ["a", [0], math.nan, 1.5, 9, True, np.float64(1.0)])
def test_collective_root_refused(root):
    # 1.5 was truncated to NPU 1.
    _refused(Collective.on, "broadcast", 4, 1e6, root=root, match="invalid collective root")


def test_collective_accepts_numpy_integers_and_keeps_its_answers():
    c = Collective.on("allgather", np.int64(4), np.float64(4096), chunks_per_npu=np.int64(2))
    assert c.npus == (0, 1, 2, 3) and all(type(p) is int for p in c.npus)
    assert (c.size_bytes, c.chunks_per_npu, c.n_chunks, c.chunk_bytes) == (4096.0, 2, 8, 512.0)
    b = Collective("broadcast", np.arange(2, 6), 10 ** 3, root=np.int64(3))
    assert b.npus == (2, 3, 4, 5) and b.root == 3 and type(b.root) is int
    assert Collective.on("reduce", [3, 1], 8).root == 3
    assert Collective.on("allreduce", (i for i in range(3)), 1e9).npus == (0, 1, 2)
