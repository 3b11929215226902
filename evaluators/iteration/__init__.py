"""The training-iteration model (issue 7): :func:`evaluate` and the TopoOpt Eq. (1) estimate.

* :mod:`~evaluators.iteration.model` -- :func:`evaluate` (system, workload, execution ->
  :class:`IterationResult`), the timeline (1F1B pipeline, overlapped gradient buckets);
* :mod:`~evaluators.iteration.inputs` -- the system (:class:`Cluster`: topology and GPU
  type) and the execution (:class:`Execution`: strategy, placement, collective method,
  routing, overlap knobs);
* :mod:`~evaluators.iteration.comm` -- timing collectives and model-parallel phases on a
  topology (intra-server fabric, hierarchical collectives, caching);
* :mod:`~evaluators.iteration.phase` -- a fast ``flow``-model simulation of messages that
  start together;
* :mod:`~evaluators.iteration.closed_form` -- :func:`closed_form_estimate`, TopoOpt
  NSDI'23 Eq. (1);
* :mod:`~evaluators.iteration.runs` -- measured runs (the CSV of ``codesign calibrate``
  and ``experiments/validation/``), :mod:`~evaluators.iteration.calibrate` -- fitting a
  GPU's compute efficiencies to them, :mod:`~evaluators.iteration.uncertainty` -- whether
  two predictions differ by more than the validated error.
"""

from evaluators.iteration.closed_form import ClosedFormEstimate, closed_form_estimate
from evaluators.iteration.inputs import COMM_OVERLAPS, Cluster, Execution, comm_overlap_options
from evaluators.iteration.model import PURPOSES, AboveBound, IterationResult, evaluate

__all__ = ["evaluate", "IterationResult", "AboveBound", "PURPOSES", "closed_form_estimate",
           "ClosedFormEstimate", "Cluster", "Execution", "COMM_OVERLAPS",
           "comm_overlap_options"]
