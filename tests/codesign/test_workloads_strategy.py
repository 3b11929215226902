"""Strategy string parser, 1F1B bubble and pipeline stage partition (brute-force oracles)."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codesign.errors import InvalidSpecError
from codesign.workloads.strategy import (
    Strategy, as_strategy, block_stages, bubble_fraction, parse_strategy, pipeline_stages,
    stage_bounds)


# ---------------------------------------------------------------------------- parser
def test_parse_full_string() -> None:
    s = parse_strategy("dp=4,tp=8,pp=2,microbatches=16,zero=1,ep=2,embedding=model")
    assert (s.dp, s.tp, s.pp, s.m, s.zero, s.ep, s.embedding) == (4, 8, 2, 16, 1, 2, "model")
    assert s.gpus == 64
    assert str(s) == "dp=4,tp=8,pp=2,microbatches=16,zero=1,ep=2,embedding=model"


def test_defaults_and_canonical_form() -> None:
    s = parse_strategy("dp=64")
    assert s == Strategy(dp=64)
    assert str(s) == "dp=64,tp=1,pp=1"
    assert s.m == 1
    assert parse_strategy("pp=4").m == 4  # default microbatches = pp
    assert parse_strategy(" tp = 2 , dp = 3 ") == Strategy(dp=3, tp=2)
    assert as_strategy(s) is s


@pytest.mark.parametrize("text, field", [
    ("", "strategy"),
    ("dp", "strategy part"),
    ("dp=2,,tp=2", "strategy part"),
    ("dp=2,foo=3", "strategy key"),
    ("dp=2,dp=4", "strategy dp"),
    ("dp=0", "strategy dp"),
    ("dp=-1", "strategy dp"),
    ("dp=1.5", "strategy dp"),
    ("dp=２", "strategy dp"),
    ("tp=1e3", "strategy tp"),
    ("zero=4", "strategy zero"),
    ("microbatches=0", "strategy microbatches"),
    ("dp=6,ep=4", "strategy ep"),
    ("embedding=rows", "strategy embedding"),
    ("DP=2", "strategy key"),
])
def test_parse_errors_name_the_field(text: str, field: str) -> None:
    with pytest.raises(InvalidSpecError) as err:
        parse_strategy(text)
    msg = str(err.value)
    assert "\n" not in msg
    assert field in msg


def test_as_strategy_rejects_other_types() -> None:
    with pytest.raises(InvalidSpecError, match="strategy"):
        as_strategy(42)  # type: ignore[arg-type]


_strategies = st.builds(
    lambda dp_over_ep, ep, tp, pp, mb, zero, emb, split, off: Strategy(
        dp=dp_over_ep * ep, tp=tp, pp=pp, microbatches=mb, zero=zero, ep=ep, embedding=emb,
        split=split, offload_layers=off),
    st.integers(1, 64), st.integers(1, 16), st.integers(1, 64), st.integers(1, 64),
    st.one_of(st.none(), st.integers(1, 10**6)), st.integers(0, 3),
    st.sampled_from(["data", "model"]), st.sampled_from(["balanced", "layers"]),
    st.one_of(st.none(), st.integers(1, 200)))
# Folded experts (etp=1): ep divides tp x dp, sequence parallelism on.
_folded = st.builds(
    lambda dp, tp_over, ep_dp, ep_tp, zero: Strategy(
        dp=dp * ep_dp, tp=2 * tp_over * ep_tp, ep=ep_dp * ep_tp, etp=1, sp=True, zero=zero),
    st.integers(1, 16), st.integers(1, 4), st.integers(1, 8), st.integers(1, 8),
    st.integers(0, 3))


@given(_strategies | _folded, st.randoms(use_true_random=False), st.booleans())
@settings(max_examples=200, deadline=None)
def test_roundtrip_any_order_and_spacing(s: Strategy, rnd, spaces: bool) -> None:
    assert parse_strategy(str(s)) == s
    parts = str(s).split(",")
    rnd.shuffle(parts)
    if spaces:
        parts = [p.replace("=", " = ") + " " for p in parts]
    assert parse_strategy(",".join(parts)) == s


@given(st.text(alphabet="dptmicrobaesz=,0123456789 -.lx", max_size=40))
@settings(max_examples=300, deadline=None)
def test_fuzz_only_invalid_spec_errors(text: str) -> None:
    try:
        s = parse_strategy(text)
    except InvalidSpecError as exc:
        assert "\n" not in str(exc)
    else:
        assert parse_strategy(str(s)) == s


# ---------------------------------------------------------------------------- bubble
def _simulate_1f1b(p: int, m: int, tf: float, tb: float) -> float:
    """Makespan of PipeDream-Flush 1F1B by dependency simulation (independent oracle).

    Stage ``s`` runs ``p - s - 1`` warm-up forwards, then alternates one forward and one
    backward, then drains the backwards.  F(s, i) needs F(s-1, i); B(s, i) needs
    B(s+1, i) (and F(s, i)); each stage runs one op at a time in its order.
    """
    orders = []
    for s in range(p):
        warm = min(p - s - 1, m)
        seq = [("F", i) for i in range(warm)]
        f, b = warm, 0
        while b < m:
            if f < m:
                seq.append(("F", f))
                f += 1
            seq.append(("B", b))
            b += 1
        orders.append(seq)
    done: dict[tuple[str, int, int], float] = {}
    pos = [0] * p
    free = [0.0] * p
    progress = True
    while progress:
        progress = False
        for s in range(p):
            while pos[s] < len(orders[s]):
                kind, i = orders[s][pos[s]]
                deps = []
                if kind == "F" and s > 0:
                    deps.append(("F", s - 1, i))
                if kind == "B":
                    deps.append(("F", s, i))
                    if s < p - 1:
                        deps.append(("B", s + 1, i))
                if any(d not in done for d in deps):
                    break
                start = max([free[s]] + [done[d] for d in deps])
                free[s] = start + (tf if kind == "F" else tb)
                done[(kind, s, i)] = free[s]
                pos[s] += 1
                progress = True
    assert all(pos[s] == len(orders[s]) for s in range(p))
    return max(free)


@pytest.mark.parametrize("p, m", [(1, 1), (2, 1), (2, 8), (4, 4), (4, 16), (8, 3), (16, 64)])
def test_bubble_fraction_matches_1f1b_simulation(p: int, m: int) -> None:
    tf, tb = 1.0, 2.0
    makespan = _simulate_1f1b(p, m, tf, tb)
    simulated = 1.0 - m * (tf + tb) / makespan
    assert bubble_fraction(p, m) == pytest.approx(simulated, abs=1e-12)
    assert Strategy(pp=p, microbatches=m).bubble_fraction == pytest.approx((p - 1) / (m + p - 1))


# ---------------------------------------------------------------------------- stages
def _brute_best(costs: list[float], pp: int) -> float:
    n = len(costs)
    best = float("inf")
    for cuts in itertools.combinations(range(1, n), pp - 1):
        bounds = (0, *cuts, n)
        best = min(best, max(sum(costs[a:b]) for a, b in zip(bounds, bounds[1:])))
    return best


@given(st.lists(st.integers(0, 50), min_size=1, max_size=9), st.integers(1, 9))
@settings(max_examples=200, deadline=None)
def test_pipeline_stages_optimal_against_brute_force(costs: list[int], pp: int) -> None:
    if pp > len(costs):
        with pytest.raises(InvalidSpecError, match="pp"):
            pipeline_stages(costs, pp)
        return
    stages = pipeline_stages(costs, pp)
    assert len(stages) == pp
    assert stages[0][0] == 0 and stages[-1][1] == len(costs)
    assert all(a < b for a, b in stages)
    assert all(stages[i][1] == stages[i + 1][0] for i in range(pp - 1))
    if sum(costs) > 0:
        worst = max(sum(costs[a:b]) for a, b in stages)
        assert worst == pytest.approx(_brute_best([float(c) for c in costs], pp), rel=1e-9)


def test_pipeline_stages_equal_layers() -> None:
    assert pipeline_stages([1.0] * 8, 4) == ((0, 2), (2, 4), (4, 6), (6, 8))


# ------------------------------------------------------------------ split=layers
def _gpt_names(blocks: int) -> list[str]:
    return (["embed"] + [f"block{i}.{k}" for i in range(blocks) for k in ("attn", "mlp")]
            + ["lm_head"])


@given(st.integers(1, 40), st.integers(1, 40))
@settings(max_examples=200, deadline=None)
def test_block_stages_give_every_rank_the_same_blocks(blocks: int, pp: int) -> None:
    # Megatron-LM's rule: num_layers // pp transformer blocks per pipeline rank (the first
    # ones one more when pp does not divide), a block's layers never split, the embedding
    # on the first rank and the output layer on the last.
    names = _gpt_names(blocks)
    if pp > blocks:
        with pytest.raises(InvalidSpecError, match="strategy pp.*blocks"):
            block_stages(names, pp)
        return
    stages = block_stages(names, pp)
    assert stages[0][0] == 0 and stages[-1][1] == len(names)
    assert all(stages[i][1] == stages[i + 1][0] for i in range(pp - 1))
    per = [len({n.split(".")[0] for n in names[a:b] if "." in n}) for a, b in stages]
    assert per == [blocks // pp + (1 if i < blocks % pp else 0) for i in range(pp)]
    assert "embed" in names[slice(*stages[0])] and "lm_head" in names[slice(*stages[-1])]


def test_split_layers_keeps_the_output_layer_on_the_last_stage() -> None:
    # A large vocabulary makes the balanced split give the last rank fewer blocks;
    # split=layers keeps Megatron's equal counts, so the last stage carries the output
    # layer on top of them.
    from codesign.workloads import get_workload

    w = get_workload("gpt3-175b", layers=8, hidden=1024, heads=8, vocab=250000)
    bal = stage_bounds(w, parse_strategy("dp=1,tp=1,pp=4"))
    lay = stage_bounds(w, parse_strategy("dp=1,tp=1,pp=4,split=layers"))
    flops = [layer.flops for layer in w.layers]
    cost = [sum(flops[a:b]) for a, b in lay]
    assert lay == block_stages([layer.name for layer in w.layers], 4) != bal
    assert max(cost) == cost[-1] > max(sum(flops[a:b]) for a, b in bal)
    # Layers without a dotted block name (a CNN) are blocks of their own.
    assert block_stages(["conv1", "conv2", "conv3", "fc"], 2) == ((0, 2), (2, 4))


def test_a_pipeline_deeper_than_the_model_names_pp():
    # Fuzzing: pp=1000 reported "invalid strategy dp*microbatches ... 1000" (its default
    # micro-batch count missing the batch) instead of the layer count it exceeds.
    from codesign.errors import InvalidSpecError
    from codesign.workloads import Strategy, get_workload
    from codesign.workloads.strategy import check_applicable

    w = get_workload("llama3-8b")
    with pytest.raises(InvalidSpecError, match=r"strategy pp 1000: expected at most the layer"):
        check_applicable(w, Strategy(pp=1000))
