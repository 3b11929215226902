"""Cloud-aware rank reordering: pairwise latency probing on Ray
(:mod:`~search.reorder.probe`) and the reordering search for ring, halving-doubling,
tree and BCube collectives (:mod:`~search.reorder.rank_order`)."""
