"""Calibrate a GPU's kernel-model efficiencies on measured runs (``codesign calibrate``).

The fitted quantities are the efficiencies of
:data:`~codesign.workloads.efficiency.FIT_PARAMETERS` (large GEMMs, fused attention,
element-wise HBM traffic), and on request the 8-bit GEMM kernels' speeds
(:data:`~codesign.workloads.efficiency.SPEED_PARAMETERS`), of ONE GPU type; everything
else (SM counts, tiles, the network, the schedule) stays as modelled.  The objective is
least squares on log time::

    min_theta  sum_i (log T_i(theta) - log T_i^measured)^2
               + w sum_j (log theta_j - log theta_j^prior)^2

(``w`` = ``prior_weight``, default 0.01: a weak pull toward the catalog's priors that
only matters for a parameter the runs do not constrain, e.g. attention efficiency when
no run uses fused attention).

Each ``T_i`` is the full iteration model (:func:`~evaluators.iteration.evaluate`), which
is costly at thousands of GPUs; compute times are inversely proportional to the
efficiencies, so the fit uses the local model ``T_i(u) = c_i0 + sum_j c_ij u_j`` in
``u_j = 1 / theta_j`` (slopes from one evaluation per parameter with ``u_j`` 25 %
larger), minimised with :func:`scipy.optimize.least_squares`; the model is then made
exact at the new point by re-evaluating it there and shifting the intercepts (a chord
method: the slopes are kept), until the parameters move by less than 0.5 %.  The
reported fit errors are exact evaluations at the final parameters; leave-one-out
(or leave-one-group-out) refits use the last linearisation and evaluate the held-out
run exactly.

With ``balance="source"`` each run's squared residual is weighted ``1 / (runs of its
source)`` (rescaled to mean 1), so that every publication counts once however many
rows its table has.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from codesign.errors import invalid
from codesign.specs import check_choice, check_int, check_number
from codesign.workloads.efficiency import (CALIBRATION_PARAMETERS, FIT_PARAMETERS,
                                          MAX_GEMM_SPEED, SPEED_PARAMETERS)
from evaluators.iteration.runs import Run, comparison_errors, predict_run

__all__ = ["Calibration", "calibrate", "relative_errors"]

_LO, _HI = 0.02, 1.0     # bounds of every efficiency (a kernel speed: up to MAX_GEMM_SPEED)
_STEP = 1.25             # u_j multiplier for the slopes
#: Largest prior weight ``w``.  At 10^6 the prior term outweighs a 100 % error on a
#: million runs: every parameter is pinned to its prior already, and larger weights only
#: lose the runs' residuals to round-off in the squared cost (inf: non-finite residuals).
MAX_PRIOR_WEIGHT = 1e6


def relative_errors(predicted: Sequence[float], measured: Sequence[float]) -> np.ndarray:
    """``predicted / measured - 1`` per run."""
    return np.asarray(predicted, float) / np.asarray(measured, float) - 1.0


@dataclass
class Calibration:
    """Result of :func:`calibrate`.

    ``hardware`` carries the fitted profile; ``predicted_s`` the exact predictions at
    the fit; ``holdout_s`` the held-out predictions (leave-one-out, or per group).
    """

    hardware: Any
    parameters: dict[str, float]
    prior: dict[str, float]
    runs: list[Run]
    predicted_s: list[float]
    holdout_s: list[float] = field(default_factory=list)
    holdout_by: str = "run"
    evaluations: int = 0

    @property
    def errors(self) -> np.ndarray:
        return relative_errors(self.predicted_s, [r.measured_s for r in self.runs])

    @property
    def holdout_errors(self) -> np.ndarray:
        return relative_errors(self.holdout_s, [r.measured_s for r in self.runs])

    @property
    def comparison_errors(self) -> np.ndarray:
        """Errors of the predicted ratios of comparable runs at the fit
        (:func:`~evaluators.iteration.runs.comparison_errors`)."""
        return comparison_errors(self.runs, self.predicted_s)

    @property
    def holdout_comparison_errors(self) -> np.ndarray:
        """The same with the held-out predictions (empty without them).  Comparable runs
        share their source, so with ``holdout="source"`` both of a pair are predicted
        by the same fit without their source."""
        return comparison_errors(self.runs, self.holdout_s) if self.holdout_s \
            else np.zeros(0)

    def summary(self) -> dict[str, Any]:
        e = np.abs(self.errors)
        out: dict[str, Any] = {
            "hardware": self.hardware.name, "runs": len(self.runs),
            "parameters": self.parameters, "prior": self.prior,
            "fit_mean_abs_error": float(e.mean()), "fit_worst_abs_error": float(e.max()),
            "evaluations": self.evaluations}
        if self.holdout_s:
            h = np.abs(self.holdout_errors)
            out[f"leave_one_{self.holdout_by}_out_mean_abs_error"] = float(h.mean())
            out[f"leave_one_{self.holdout_by}_out_worst_abs_error"] = float(h.max())
        # Ratios of comparable runs (one source, one model and format): the error of a
        # comparison, which evaluators.iteration.uncertainty.compare uses.
        c = self.comparison_errors
        out["comparison_pairs"] = int(len(c))
        if len(c):
            out["fit_comparison_mean_error"] = float(c.mean())
            out["fit_comparison_worst_error"] = float(c.max())
            hc = self.holdout_comparison_errors
            if len(hc):
                out[f"leave_one_{self.holdout_by}_out_comparison_mean_error"] = \
                    float(hc.mean())
                out[f"leave_one_{self.holdout_by}_out_comparison_worst_error"] = \
                    float(hc.max())
        out["per_run"] = [
            {"id": r.id, "source": r.source, "measured_s": r.measured_s, "predicted_s": p,
             "error": p / r.measured_s - 1,
             **({"holdout_s": self.holdout_s[i],
                 "holdout_error": self.holdout_s[i] / r.measured_s - 1}
                if self.holdout_s else {})}
            for i, (r, p) in enumerate(zip(self.runs, self.predicted_s))]
        return out


class _Linear:
    """``T_i(u) = c0_i + C_i . u`` around a base point (module docstring)."""

    def __init__(self, c0: np.ndarray, C: np.ndarray) -> None:
        self.c0, self.C = c0, C

    def times(self, theta: np.ndarray, rows: np.ndarray | slice = slice(None)) -> np.ndarray:
        return self.c0[rows] + self.C[rows] @ (1.0 / theta)


def _hw_at(hw, names: Sequence[str], theta: np.ndarray):
    return hw.with_compute_parameters(**{n: float(v) for n, v in zip(names, theta)})


def _upper(names: Sequence[str]) -> np.ndarray:
    """Upper bound of each parameter: 1 for an efficiency, MAX_GEMM_SPEED for a speed."""
    return np.array([MAX_GEMM_SPEED if n in SPEED_PARAMETERS else _HI for n in names])


def _solve(lin: _Linear, measured: np.ndarray, rows: np.ndarray, start: np.ndarray,
           prior: np.ndarray, weight: float, run_weights: np.ndarray,
           upper: np.ndarray) -> np.ndarray:
    from scipy.optimize import least_squares

    logm = np.log(measured[rows])
    sw = math.sqrt(weight)
    rw = run_weights[rows]
    rw = np.sqrt(rw * len(rw) / rw.sum())    # mean weight 1: the prior keeps its pull

    def resid(x: np.ndarray) -> np.ndarray:
        theta = np.exp(x)
        t = np.maximum(lin.times(theta, rows), 1e-12)
        r = rw * (np.log(t) - logm)
        return np.concatenate([r, sw * (x - np.log(prior))]) if weight > 0 else r

    hi = np.log(upper)
    x0 = np.clip(np.log(start), math.log(_LO), hi)
    sol = least_squares(resid, x0, bounds=(math.log(_LO), hi), xtol=1e-10,
                        ftol=1e-12, gtol=1e-12)
    return np.exp(sol.x)


def calibrate(runs: Sequence[Run], hardware, *, parameters: Sequence[str] = FIT_PARAMETERS,
              prior_weight: float = 0.01, holdout: str | None = "run",
              balance: str | None = None, max_rounds: int = 6,
              progress: Callable[[str], None] | None = None,
              **evaluate_kwargs: Any) -> Calibration:
    """Fit ``parameters`` of ``hardware``'s compute profile to ``runs`` (module docstring).

    Parameters
    ----------
    runs : sequence of Run
        Measured runs of this GPU type (:func:`~evaluators.iteration.runs.load_runs`).
    hardware : Hardware
        The GPU; its compute profile is the starting point and the prior.
    parameters : sequence of str
        Which of :data:`~codesign.workloads.efficiency.CALIBRATION_PARAMETERS` to fit
        (default the three efficiencies; the rest stay).  ``fp8_gemm_speed`` needs runs
        in 16 and 8 bit of comparable configurations to be constrained.
    prior_weight : float
        ``w`` of the module docstring (>= 0).
    holdout : {"run", "source", None}
        Leave-one-run-out, leave-one-source-out, or no held-out errors.
    balance : {None, "source"}
        ``None``: every run weighs the same; ``"source"``: every source (publication)
        weighs the same, its runs ``1 / (its number of runs)`` each, so that one table
        of many similar runs does not set the parameters alone.
    max_rounds : int
        Refits (one evaluation pass each) at most.
    progress : callable, optional
        Called with a short message after each pass.

    Returns
    -------
    Calibration

    Raises
    ------
    InvalidSpecError
        No runs, ``runs`` not a sequence of :class:`~evaluators.iteration.runs.Run`,
        runs of another GPU, a GPU without a compute profile, an unknown parameter, a
        bad weight, ``max_rounds`` not an integer >= 0 or a ``progress`` that is not
        callable.
    """
    from codesign.workloads.hardware import get_hardware

    hw = get_hardware(hardware)
    if isinstance(runs, (str, bytes)) or not isinstance(runs, Iterable):
        raise invalid("calibrate runs", runs, "a sequence of Run (from load_runs)")
    runs = list(runs)
    if not runs:
        raise invalid("calibrate runs", 0, "at least one run")
    bad = [r for r in runs if not isinstance(r, Run)]
    if bad:
        raise invalid("calibrate run", bad[0], "a Run (from load_runs)")
    check_int("max_rounds", max_rounds, 0)
    if progress is not None and not callable(progress):
        raise invalid("progress", progress, "None or a function of one message")
    for r in runs:
        if r.hardware.lower() != hw.name.lower():
            raise invalid(f"run {r.id!r} gpu", r.hardware, f"{hw.name} (one GPU type per fit)")
    if hw.compute is None:
        raise invalid("calibrate hardware", hw.name, "a GPU with a compute profile "
                      "(add a compute: mapping with its sms to the hardware file)")
    names = list(parameters)
    if not names:
        raise invalid("calibrate parameters", ",".join(names),
                      f"at least one of {', '.join(CALIBRATION_PARAMETERS)}")
    for n in names:
        check_choice("calibrate parameter", n, CALIBRATION_PARAMETERS)
    if len(set(names)) != len(names):
        raise invalid("calibrate parameters", ",".join(names), "each parameter once")
    check_number("prior_weight", prior_weight, minimum=0.0, inclusive=True,
                 maximum=MAX_PRIOR_WEIGHT)
    if holdout not in ("run", "source", None):
        raise invalid("holdout", holdout, "run, source or none")
    if balance not in ("source", None):
        raise invalid("balance", balance, "source or none")
    counts: dict[str, int] = {}
    for r in runs:
        counts[r.source] = counts.get(r.source, 0) + 1
    run_weights = (np.array([1.0 / counts[r.source] for r in runs]) if balance
                   else np.ones(len(runs)))
    prior = np.array([getattr(hw.compute, n) for n in names], float)
    measured = np.array([r.measured_s for r in runs])
    n_eval = 0

    def predict_all(theta: np.ndarray, label: str) -> np.ndarray:
        nonlocal n_eval
        h = _hw_at(hw, names, theta)
        out = np.array([predict_run(r, h, **evaluate_kwargs) for r in runs])
        n_eval += len(runs)
        if progress:
            progress(label)
        return out

    def linearise(theta: np.ndarray, base: np.ndarray) -> _Linear:
        C = np.zeros((len(runs), len(names)))
        u = 1.0 / theta
        for j, n in enumerate(names):
            t2 = theta.copy()
            t2[j] = theta[j] / _STEP
            C[:, j] = (predict_all(t2, f"slope {n}") - base) / (u[j] * (_STEP - 1))
        return _Linear(base - C @ u, C)

    upper = _upper(names)
    theta = prior.copy()
    base = predict_all(theta, "start")
    every = np.arange(len(runs))
    lin = linearise(theta, base)
    for _ in range(max_rounds):
        new = _solve(lin, measured, every, theta, prior, prior_weight, run_weights, upper)
        moved = float(np.max(np.abs(new / theta - 1)))
        theta = new
        base = predict_all(theta, "refit")
        if moved < 0.005:
            break
        # Chord step: keep the slopes, move the intercepts so that the local model is
        # exact at the new point (one evaluation pass per round instead of 1 + p).
        lin = _Linear(base - lin.C @ (1.0 / theta), lin.C)
    result = Calibration(hardware=_hw_at(hw, names, theta),
                         parameters={n: float(v) for n, v in zip(names, theta)},
                         prior={n: float(v) for n, v in zip(names, prior)},
                         runs=runs, predicted_s=[float(t) for t in base])
    if holdout is not None and len(runs) > 1:
        keys = [r.id if holdout == "run" else r.source for r in runs]
        held = [0.0] * len(runs)
        for key in dict.fromkeys(keys):
            out = np.array([k == key for k in keys])
            if out.all():      # a single group: nothing to hold out against
                continue
            th = _solve(lin, measured, every[~out], theta, prior, prior_weight,
                        run_weights, upper)
            h = _hw_at(hw, names, th)
            for i in every[out]:
                held[i] = predict_run(runs[i], h, **evaluate_kwargs)
                n_eval += 1
        if all(held):
            result.holdout_s = held
            result.holdout_by = holdout
    result.evaluations = n_eval
    return result
