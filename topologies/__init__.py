"""Networks: the topology model, families, routing, cost and file formats."""

from topologies.model import Dimension, Topology

__all__ = ["Dimension", "Topology"]
