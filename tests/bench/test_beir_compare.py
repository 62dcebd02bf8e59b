"""bench/beir/compare.py: the paired comparison of two runs says which run won where, and its interval
holds 0 only when the runs are not told apart."""

from bench.beir.compare import compare


def run(values: dict[str, float]) -> dict:
    return {"ndcg@10_per_query": values}


def test_a_run_better_on_every_query_has_a_difference_interval_above_zero():
    first = run({str(q): 0.5 for q in range(50)})
    second = run({str(q): 0.6 + (q % 3) * 0.01 for q in range(50)})
    result = compare(first, second)
    assert result["second_better"] == 50 and result["first_better"] == result["tied"] == 0
    low, high = result["difference"]["interval"]
    assert 0 < low <= result["difference"]["mean"] <= high


def test_runs_that_trade_wins_evenly_are_not_told_apart():
    first = run({str(q): 0.5 + (0.2 if q % 2 else -0.2) for q in range(60)})
    second = run({str(q): 0.5 for q in range(60)})
    result = compare(first, second)
    assert (result["second_better"], result["first_better"]) == (30, 30)
    low, high = result["difference"]["interval"]
    assert low < 0 < high
