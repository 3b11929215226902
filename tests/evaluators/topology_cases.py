"""Topologies shared by the evaluator tests (plain module, imported by test files)."""

from topologies.builder import LinkBuilder
from topologies.registry import from_spec


def irregular():
    """Two triangles joined by one slow cable and a chord through a 2-port switch:
    no dims, unequal bandwidths, multi-hop routes."""
    b = LinkBuilder(6, 1)
    b.cable([0, 1, 2, 3, 4, 5], [1, 2, 0, 4, 5, 3], 25e9, 1e-6)
    b.cable(2, 3, 10e9, 2e-6)
    b.cable([0, 5], [6, 6], 40e9, 0.5e-6)
    return b.build(name="irregular")


_CACHE: dict = {}


def cached_topology(spec):
    """``from_spec(spec)`` (or :func:`irregular` for ``"irregular"``), built once per session."""
    if spec not in _CACHE:
        _CACHE[spec] = irregular() if spec == "irregular" else from_spec(spec)
    return _CACHE[spec]
