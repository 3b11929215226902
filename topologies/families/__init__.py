"""Built-in topology families; importing this package registers them all."""

from topologies.families import multidim  # noqa: F401
