"""Benchmark: one LLM training iteration with the execution knobs (issue 15).

GPT-3 175B on 1024 A100 GPUs (128 servers of 8) with Megatron-style strategies (TP 8
inside the server, PP 16, sequence parallelism, distributed optimizer, recomputation,
interleaving, context parallelism, partial recomputation; Mixtral 8x7B with its experts
folded over tensor x data parallelism; DeepSeek-V3 on 2,048 H100 with its node-limited
routing and the FP8 hierarchical expert dispatch, as the MoE check of
``experiments/validation/moe_check.csv`` runs it), timed by :func:`evaluators.iteration.evaluate`
on a fat-tree (``fattree:k=8``: 128 servers) through the ``flow`` network model
(``auto`` collectives and routing: ring and ECMP on switched fabrics) from a freshly
built topology (cold caches). Target (issue 15): under 2 s per evaluation, so that
sweeps with a strategy search stay fast. Also reports Llama 3 405B's published
configuration on 8,192 H100 (1024 servers of an ideal switch) for scale. Prints a table
and appends it to ``experiments/benchmarks/RESULTS.md``.

With ``--warm``, also what a strategy search pays per candidate on a fabric it has
already timed (caches warm, collective method ``best``): Llama 3 70B on 1024 H100 and
Llama 3 405B on 16,384 and 32,768 H100 (the what-ifs' starts and answers).

Usage::

    python experiments/benchmarks/bench_iteration_llm.py [--repeat 3] [--warm] [--no-append]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from codesign.workloads import get_workload
from evaluators.iteration import evaluate
from topologies.registry import from_spec

sys.path.insert(0, str(Path(__file__).parent))
from results_file import append_result, markdown_table, print_rows  # noqa: E402

CASES = (
    ("gpt3-175b", "fattree:k=8,bw=200Gbps", "A100-80",
     "dp=8,tp=8,pp=16,microbatches=192,sp=true,zero=1,recompute=selective"),
    ("gpt3-175b", "fattree:k=8,bw=200Gbps", "A100-80",
     "dp=8,tp=8,pp=16,microbatches=192,zero=1,recompute=full"),
    ("gpt3-175b", "fattree:k=8,bw=200Gbps", "A100-80",
     "dp=8,tp=8,pp=16,microbatches=192,sp=true,zero=1,schedule=interleaved,vpp=2,"
     "recompute=selective"),
    ("gpt3-175b", "fattree:k=8,bw=200Gbps", "A100-80",
     "dp=4,tp=8,pp=16,cp=2,microbatches=384,sp=true,zero=1"),
    ("gpt3-175b", "fattree:k=8,bw=200Gbps", "A100-80",
     "dp=8,tp=8,pp=16,microbatches=192,sp=true,zero=1,recompute=full,recompute_layers=3"),
    ("mixtral-8x7b", "fattree:k=8,bw=200Gbps", "A100-80",
     "dp=4,tp=8,pp=32,microbatches=32,sp=true,ep=8,etp=1,zero=1"),
    ("llama3-405b", "ideal:1024,degree=8,bw=400Gbps", "H100",
     "dp=64,tp=8,pp=16,microbatches=32,sp=true,zero=2"),
    ("deepseek-v3", "ideal:256,degree=8,bw=400Gbps", "H100",
     "dp=128,pp=16,ep=64,microbatches=120,zero=1,precision=fp8-cs"),
)
#: What a strategy search pays per candidate: the same fabric's caches warm (the what-if's
#: 1024-H100 start on its leaf-spine, Llama 3 405B's 16k-GPU answer of the scale what-if
#: and the 32k one's, README "What-if at scale"), best of ``--repeat`` after one cold run.
WARM_CASES = (
    ("llama3-70b", "leafspine:128,oversub=2,hosts_per_leaf=64,bw=3200Gbps", "H100",
     "dp=256,tp=4,microbatches=8,zero=2,sp=true"),
    ("llama3-405b", "leafspine:2048,oversub=2,hosts_per_leaf=64,bw=3200Gbps", "H100",
     "dp=256,tp=8,pp=8,microbatches=8,zero=2,sp=true,schedule=interleaved,vpp=8"),
    ("llama3-405b", "leafspine:4096,oversub=2,hosts_per_leaf=2048,bw=3200Gbps", "H100",
     "dp=1024,tp=8,pp=2,cp=2,microbatches=2,zero=3,sp=true"),
)
#: Workloads that are zoo entries with options (DeepSeek-V3, the moe_check.csv row: the
#: report's Sec. 2.1 / 4.2 architecture on the MoE builder) and the evaluate options
#: their run states.
BUILT = {"deepseek-v3": ("mixtral-8x7b", dict(
    layers=61, hidden=7168, heads=128, kv_heads=128, head_dim=128, ffn=2048, experts=256,
    top_k=8, shared_experts=1, vocab=129280, kv_lora_rank=512, q_lora_rank=1536,
    rope_head_dim=64, v_head_dim=128, dense_layers=3, dense_ffn=18432, expert_groups=8,
    group_top_k=4, bias=False, seq_len=4096, batch_size=15360))}
OPTIONS = {"deepseek-v3": dict(check_memory=False, param_gather_overlap=True,
                               ep_comm_overlap=True, ep_dispatch="hierarchical-fp8")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3, help="runs; the best is reported")
    ap.add_argument("--no-append", action="store_true", help="do not write RESULTS.md")
    ap.add_argument("--warm", action="store_true",
                    help="also the warm-cache evaluations of WARM_CASES (up to 16k and 32k "
                         "GPUs; about a minute)")
    args = ap.parse_args()

    rows = []
    for name, spec, hw, strategy in CASES:
        base, options = BUILT.get(name, (name, {}))
        w = get_workload(base, **options)
        best, r = float("inf"), None
        for _ in range(args.repeat):
            topo = from_spec(spec)          # fresh: cold route / collective caches
            t0 = time.perf_counter()
            r = evaluate(topo, w, strategy, hardware=hw, collective_method="auto",
                         routing="auto", **OPTIONS.get(name, {}))
            best = min(best, time.perf_counter() - t0)
        target = " (target < 2 s)" if r.gpus == 1024 else ""
        rows.append((f"{name} on {r.gpus} {hw}, `{spec}`, `{strategy}`",
                     f"{best:.3f} s{target}; iteration {r.iteration_time_s:.2f} s, "
                     f"MFU {r.mfu:.3f}, bubble {r.breakdown['bubble_s']:.2f} s, "
                     f"memory {r.memory['total_bytes'] / 2**30:.1f} GiB"))
    for name, spec, hw, strategy in WARM_CASES if args.warm else ():
        w, topo = get_workload(name), from_spec(spec)
        t0 = time.perf_counter()
        r = evaluate(topo, w, strategy, hardware=hw, collective_method="best", routing="auto")
        cold = time.perf_counter() - t0
        best = float("inf")
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            evaluate(topo, w, strategy, hardware=hw, collective_method="best", routing="auto")
            best = min(best, time.perf_counter() - t0)
        rows.append((f"warm: {name} on {r.gpus} {hw}, `{spec}`, `{strategy}`",
                     f"{best:.3f} s (cold {cold:.2f} s); iteration {r.iteration_time_s:.3f} s"))
        print(rows[-1], flush=True)
    print_rows(rows)
    if not args.no_append:
        append_result("Iteration model with LLM execution knobs (evaluate wall time)",
                      " ".join(["python experiments/benchmarks/bench_iteration_llm.py",
                                *sys.argv[1:]]),
                      markdown_table(rows))


if __name__ == "__main__":
    main()
