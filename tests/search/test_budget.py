"""search.budget.best_per_budget against brute force (the rule both callers used before)."""

from hypothesis import given, settings
from hypothesis import strategies as st

from evaluators.iteration.uncertainty import compare
from search.budget import best_per_budget

designs_st = st.lists(st.tuples(st.integers(1, 5).map(float),        # cost: ties likely
                                st.integers(1, 40).map(lambda t: t / 10)),   # time, s
                      min_size=0, max_size=12)


@settings(max_examples=200, deadline=None)
@given(designs_st, st.lists(st.integers(0, 6).map(float), min_size=1, max_size=4),
       st.sampled_from([None, 0.0, 0.05, 0.3]))
def test_matches_brute_force(raw, budgets, err):
    designs = [(i, c, t) for i, (c, t) in enumerate(raw)]
    for budget, pick in zip(budgets, best_per_budget(designs, budgets, err)):
        fit = [d for d in designs if d[1] <= budget]
        if not fit:
            assert pick.best is None
            continue
        best = min(fit, key=lambda d: (d[2], d[1], d[0]))
        assert pick.best == best[0]
        if err is None:
            assert pick.close is None
        else:   # every other affordable design within the error, whatever the order
            want = {d[0] for d in fit if d is not best
                    and not compare(best[2], d[2], err).significant}
            assert set(pick.close) == want
