"""The quickstart study: the canonical small sweep with an embedded specification.

``codesign quickstart`` calls :func:`run_quickstart`, which runs
:func:`search.sweeps.driver.run_sweep` on :data:`QUICKSTART_SPEC` (the same
specification as ``experiments/sweeps/small.yaml``; a test keeps them equal):
16 servers of 8 A100-80 GPUs training ResNet-50 (pure data parallelism) and DLRM
(embedding tables on servers), six fabric families, degree 2-8, 25-400 Gbps links, 12 NSGA-II trials
minimising iteration time and network cost.  ``codesign report`` then reads
``results/quickstart/``.

Unlike ``codesign sweep``, the quickstart always tops its study up (running it
twice does nothing the second time; raising ``trials`` runs only the missing
ones).  The loop, outcomes, records and resume rules are those of
:mod:`search.sweeps.driver`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from codesign.specs import check_int
from search.sweeps.driver import SweepPoint, SweepResult, TrialOutcome, run_sweep
from search.sweeps.spec import SweepSpec, parse_sweep_spec

__all__ = ["DEFAULT_FAMILIES", "QUICKSTART_SPEC", "QuickstartConfig", "run_quickstart"]

#: The embedded specification (``experiments/sweeps/small.yaml``).
QUICKSTART_SPEC: dict[str, Any] = {
    "study": "quickstart",
    "workloads": [{"name": "resnet50", "weight": 1},
                  {"name": "dlrm", "weight": 1, "strategy": "dp=128,embedding=model"}],
    "space": {
        "families": ["fattree", "leafspine", "ideal", "expander", "torus", "perms"],
        "servers": 16,
        "degree": {"low": 2, "high": 8},
        "link_rate": ["25Gbps", "100Gbps", "200Gbps", "400Gbps"],
        "gpu": ["A100-80"],
        "collective_method": ["auto"],
        "strategy_search": False,
        "leafspine_oversub": 2,
    },
    "objectives": ["iteration_time_s", "cost_usd"],
    "sampler": "nsga2",
    "population_size": 6,
    "trials": 12,
    "max_in_flight": 2,
    "seed": 0,
    "batch_size": 4,
}

#: Families compared by default (TopoOpt Section 5.1's architectures that exist here).
DEFAULT_FAMILIES = tuple(QUICKSTART_SPEC["space"]["families"])


@dataclass(frozen=True)
class QuickstartConfig:
    """Overrides of the embedded specification and where to run it.

    Attributes
    ----------
    servers : int, optional
        Servers in every design (default 16).
    trials : int, optional
        Planned number of trials (default 12); a rerun tops up to it.
    seed : int, optional
        Sampler seed (default 0).
    results_dir : str or pathlib.Path
        Root of the results; the study lives in ``results_dir/quickstart/``.
    ray_address : str, optional
        Join this Ray cluster instead of starting a local instance.
    num_cpus : int, optional
        CPUs of the local Ray instance (default: all).
    """

    servers: int | None = None
    trials: int | None = None
    seed: int | None = None
    results_dir: str | Path = "results"
    ray_address: str | None = None
    num_cpus: int | None = None

    def __post_init__(self) -> None:
        for name, minimum in (("servers", 2), ("trials", 1), ("seed", 0), ("num_cpus", 1)):
            if getattr(self, name) is not None:
                check_int(f"quickstart {name}", getattr(self, name), minimum)

    def spec(self) -> SweepSpec:
        """The sweep specification: :data:`QUICKSTART_SPEC` with the overrides."""
        raw = {**QUICKSTART_SPEC, "space": dict(QUICKSTART_SPEC["space"])}
        if self.servers is not None:   # (an integer >= 2: __post_init__)
            raw["space"]["servers"] = self.servers
            # DLRM's strategy is TopoOpt's hybrid for the 128 GPUs of 16 servers; on other
            # server counts its feasible start (dp=128 on 54 servers had every DLRM trial
            # pruned, and no dp over 8 x servers divides its batch for most counts).
            if self.servers != QUICKSTART_SPEC["space"]["servers"]:
                raw["workloads"] = [{k: v for k, v in w.items() if k != "strategy"}
                                    for w in QUICKSTART_SPEC["workloads"]]
        if self.trials is not None:
            raw["trials"] = self.trials
        if self.seed is not None:
            raw["seed"] = self.seed
        return parse_sweep_spec(raw, where="quickstart spec")


def run_quickstart(config: QuickstartConfig | None = None, *,
                   progress: Callable[[int, int], Any] | None = None,
                   evaluate: Callable[[SweepPoint], TrialOutcome] | None = None
                   ) -> SweepResult:
    """Run (or top up) the quickstart study and write its records.

    Parameters
    ----------
    config : QuickstartConfig, optional
        Overrides and placement (default: the embedded spec under ``results/``).
    progress : callable, optional
        ``progress(done, total)`` after every finished trial of this call.
    evaluate : callable, optional
        Replacement evaluation (tests), see :func:`search.sweeps.driver.run_sweep`.

    Returns
    -------
    SweepResult
        ``results_dir`` is the folder to pass to :func:`codesign.app.report.write_report`.

    Notes
    -----
    The 12-trial default takes well under a minute on 2 cores, most of it Ray start-up.
    """
    config = config if config is not None else QuickstartConfig()
    return run_sweep(config.spec(), results_dir=config.results_dir, resume=True,
                     ray_address=config.ray_address, num_cpus=config.num_cpus,
                     progress=progress, evaluate=evaluate)
