"""Cluster co-design: topology x parallelization strategy x collective algorithm.

This package is the bottom layer (units, errors, specs, workloads, records) and
must stay light: it imports none of ``topologies``, ``evaluators`` or ``search``
and no heavy dependency at import time (docs/architecture.md section 2).  Its
subpackage :mod:`codesign.app` (the command line and the report) is the top layer.
"""

from codesign.errors import CodesignError, InfeasibleError, InvalidSpecError

__version__ = "0.1.0"

__all__ = ["CodesignError", "InfeasibleError", "InvalidSpecError", "__version__"]
