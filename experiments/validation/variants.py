"""Re-run the validation with a variant of the compute model that was tried and dropped.

Each variant changes one thing of the kernel model for this process only, then runs
``validate.py`` (same fit, same leave-one-source-out); the numbers are in README.md's
results section.  Nothing here is used by ``codesign``.

Variants
--------
``kernel-overhead``
    A fixed cost per kernel launch, ``--overhead-us`` microseconds, added to every
    kernel the kernel model times: per layer and micro-batch one kernel per GEMM, fused
    attention and listed memory-bound operator forward; two per GEMM and per fused
    attention (FlashAttention-2's backward runs a pre-processing kernel besides its main
    one) and one per memory-bound operator backward.  5 us is an upper bound: the host
    side of one launch through the CUDA runtime (4-6 us, measured e.g. by the
    "pegainfer" CUDA-graph study), which reaches the GPU's timeline only when the host
    cannot run ahead of the kernels.
``tile-choice``
    cuBLAS picks, per GEMM, the fastest of its tile shapes (NVIDIA, *Matrix
    Multiplication Background User's Guide*, Sec. 2.3 "Typical tile dimensions in
    cuBLAS": 256x128 / 128x256, 128x128, 256x64 / 64x256, 128x64 / 64x128, 64x64)
    instead of always 256x128 -- without the lower efficiency of the smaller tiles, so
    an upper bound of what tile choice can change.

Usage::

    python experiments/validation/variants.py kernel-overhead [--overhead-us 5] [--out FILE]
    python experiments/validation/variants.py tile-choice [--out FILE]
"""

from __future__ import annotations

import argparse
import runpy
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

import codesign.workloads.compute as compute
import codesign.workloads.demand as demand
from codesign.workloads.efficiency import gemm_time

HERE = Path(__file__).parent
TILES = ((256, 128), (128, 256), (128, 128), (256, 64), (64, 256), (128, 64), (64, 128),
         (64, 64))


def kernel_overhead(seconds: float) -> None:
    base = compute.layer_time

    def timed(layer, hardware, batch, **kw):
        t = base(layer, hardware, batch, **kw)
        if t.fwd_bound != "kernels":
            return t
        g = len(layer.gemms)
        fa = 1 if layer.attention_kernel == "flash" and layer.attn_core_fwd_flops else 0
        mo = len(layer.memory_ops) if layer.memory_ops else 1
        return replace(t, fwd_s=t.fwd_s + seconds * (g + fa + mo),
                       bwd_s=t.bwd_s + seconds * (2 * g + 2 * fa + mo))

    # The demand imports layer_time by name; replace it there too.
    compute.layer_time = demand.layer_time = timed


def tile_choice() -> None:
    profiles: dict[int, tuple] = {}

    def best(m, n, k, *, profile, **kw):
        ps = profiles.get(id(profile))
        if ps is None or ps[0] is not profile:
            ps = profiles[id(profile)] = (profile, [replace(profile, tile_m=a, tile_n=b)
                                                    for a, b in TILES])
        return min(gemm_time(m, n, k, profile=p, **kw) for p in ps[1])

    compute.gemm_time = best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("variant", choices=("kernel-overhead", "tile-choice"))
    ap.add_argument("--overhead-us", type=float, default=5.0)
    ap.add_argument("--out", default=None, help="validation table (default: "
                    "variant-NAME.md in the temporary directory; never validation.md)")
    args = ap.parse_args()
    if args.variant == "kernel-overhead":
        kernel_overhead(args.overhead_us * 1e-6)
    else:
        tile_choice()
    out = args.out or str(Path(tempfile.gettempdir()) / f"variant-{args.variant}.md")
    sys.argv = ["validate.py", "--out", out]
    runpy.run_path(str(HERE / "validate.py"), run_name="__main__")


if __name__ == "__main__":
    main()
