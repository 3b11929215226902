"""TopoOpt's TopologyFinder and OCS-reconfig (NSDI'23, Sec. 4 and Appendix E).

* :mod:`~topologies.topoopt.perms` -- TotientPerms (Algorithm 2), SelectPermutations
  (Algorithm 3), Theorem 1's diameter bound;
* :mod:`~topologies.topoopt.coin_change` -- CoinChangeMod routing (Algorithm 4);
* :mod:`~topologies.topoopt.matching` -- MP matchings with the Discount (Alg. 1
  lines 12-17, App. E.4 Eq. 2);
* :mod:`~topologies.topoopt.repair` -- filling free interfaces, OWAN two-edge
  replacement for connectivity;
* k shortest paths for MP routing: :func:`topologies.routing.k_shortest_paths`;
* :mod:`~topologies.topoopt.finder` -- :func:`topology_finder` (Algorithm 1);
* :mod:`~topologies.topoopt.ocs` -- :func:`ocs_reconfig` (Algorithm 5; the epoch loop
  around it is :class:`evaluators.netsim.reconfigurable.ReconfigurableFabric`).
"""

from topologies.topoopt.coin_change import CoinTable, coin_change_mod, coin_change_table
from topologies.topoopt.finder import TopoOptResult, topology_finder
from topologies.topoopt.ocs import OCSResult, ocs_reconfig
from topologies.topoopt.perms import (
    ring_order, ring_targets, select_permutations, theorem1_diameter_bound, totient_perms)

__all__ = ["totient_perms", "ring_order", "ring_targets", "select_permutations",
           "theorem1_diameter_bound", "coin_change_mod", "coin_change_table", "CoinTable",
           "topology_finder", "TopoOptResult", "ocs_reconfig", "OCSResult"]
