"""Built-in topology families; importing this package registers them all."""

from topologies.families import clos, direct, multidim, nodes  # noqa: F401
