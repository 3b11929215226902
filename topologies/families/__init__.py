"""Built-in topology families; importing this package registers them all."""

from topologies.families import clos, direct, multidim, nodes  # noqa: F401
from topologies.families import themis_presets  # noqa: F401  (Themis Table 2 presets)
from topologies.families import gpu_clos, scaleup, tpu  # noqa: F401  (today's GPU fabrics)
