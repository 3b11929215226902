"""TopoOpt's alternating optimisation of strategy and topology on Ray, with its
baselines (:mod:`~search.topoopt.alternating`; NSDI'23 Sec. 4 and 5)."""
