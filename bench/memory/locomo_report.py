"""The LoCoMo bench's report: its tables and its plot (bench/memory/memory_locomo.py)."""

from __future__ import annotations

from pathlib import Path

from locomo_data import BUDGETS, CATEGORIES, CATEGORY_NAMES, MOSTS, PARTS, Tally, settings_asked


def report(tally: Tally, facts: dict, questions: int) -> list[str]:
    names = [name for name, _m, _c in settings_asked()]
    lines = [
        f"LoCoMo dev split: {questions} questions of categories 1-4; evidence recall % (all-evidence %)",
        "",
    ]
    header = f"{'method':<18}" + "".join(f"{name:>14}" for name in names)
    lines += [header, "-" * len(header)]
    for method in tally.methods():
        row = f"{method:<18}"
        for name in names:
            recall, every = tally.figures(method, name)
            row += f"{recall:>7.1f} ({every:4.1f})"
        lines.append(row)
    for category in CATEGORIES:
        lines += ["", f"category {category} ({CATEGORY_NAMES[category]}), evidence recall %", header]
        for method in tally.methods():
            lines.append(
                f"{method:<18}" + "".join(f"{tally.figures(method, n, category)[0]:>14.1f}" for n in names)
            )
    lines += ["", *margins(tally)]
    store = facts.get("store", {})
    if store:
        lines += [
            f"store: {store['records']} episodes ({store['chars']:,} characters) in {store['seconds']:.1f} "
            "s, "
            f"{store['records_per_s']:.1f}/s; POST p50 {store['p50_ms']:.0f} ms, p95 {store['p95_ms']:.0f} "
            "ms "
            "(node builds running)"
        ]
    if "nodes" in facts:
        lines += [
            f"nodes: {facts['nodes']} (mean {facts['node_chars_mean']:.0f} characters) ready "
            f"{facts['nodes_ready_s']:.1f} s after the first store: {facts['nodes_per_s']:.1f} nodes/s"
        ]
    if "recall" in facts:
        lines += [
            "recall over HTTP at most 5 (default budget), one client: "
            f"p50 {facts['recall']['p50_ms']:.1f} ms, "
            f"p95 {facts['recall']['p95_ms']:.1f} ms over {facts['recall']['questions']} questions"
        ]
    if "recall_load" in facts:
        load = facts["recall_load"]
        lines += [
            f"recall under load ({load['clients']} clients at once, most 5): p50 {load['p50_ms']:.1f} ms, "
            f"p95 {load['p95_ms']:.1f} ms over {load['questions']} recalls, {load['per_s']:.1f} recalls/s"
        ]
    return lines


def _ci(estimate: float, low: float, high: float, signed: bool = False) -> str:
    sign = "+" if signed else ""
    return f"{estimate:{sign}.1f} [{low:{sign}.1f}, {high:{sign}.1f}]"


def margins(tally: Tally) -> list[str]:
    """At each budget, per part of the split (all, tuning, check) and per category (1-4 together, then
    each): ragsite, the best baseline on those questions, and ragsite's margin over it, each with its
    95 % bootstrap interval (the margin's paired, question by question)."""
    budgets = [f"{b // 1000}k" for b in BUDGETS]
    lines = []
    for part in (None, *PARTS):
        label = "all five" if part is None else f"{part} ({', '.join(PARTS[part])})"
        for category in (None, *CATEGORIES):
            what = (
                "categories 1-4" if category is None else f"category {category} ({CATEGORY_NAMES[category]})"
            )
            count = len(tally.rows("ragsite", budgets[0], category, part))
            lines += [
                f"{label}, {what}: {count} questions; evidence recall % [95 % bootstrap interval]",
                f"{'':<10}{'ragsite':>22}{'best baseline':>38}{'margin':>26}",
            ]
            for name in budgets:
                best = tally.best_baseline(name, category, part)
                lines.append(
                    f"{name:<10}{_ci(*tally.interval('ragsite', name, category, part)):>22}"
                    f"{_ci(*tally.interval(best, name, category, part)) + ' ' + best:>38}"
                    f"{_ci(*tally.interval('ragsite', name, category, part, minus=best), signed=True):>26}"
                )
            lines.append("")
    return lines


def plot(tally: Tally, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for method in tally.methods():
        style = (
            {"linewidth": 2.5, "color": "black"} if method == "ragsite" else {"linewidth": 1, "alpha": 0.8}
        )
        axes[0].plot(
            [b / 1000 for b in BUDGETS],
            [tally.figures(method, f"{b // 1000}k")[0] for b in BUDGETS],
            marker="o",
            label=method,
            **style,
        )
        axes[1].plot(
            MOSTS, [tally.figures(method, f"most {m}")[0] for m in MOSTS], marker="o", label=method, **style
        )
    axes[0].set(
        xlabel="characters returned (thousands)",
        ylabel="evidence recall, % (categories 1-4)",
        title="At a character budget",
        xscale="log",
        xticks=[1, 2, 4, 8],
        xticklabels=["1k", "2k", "4k", "8k"],
    )
    axes[1].set(xlabel="excerpts returned (most)", title="At a number of excerpts", xticks=list(MOSTS))
    axes[1].legend(fontsize=8, loc="lower right")
    for axis in axes:
        axis.grid(alpha=0.3)
    figure.suptitle("LoCoMo development split: memory recall against plain baselines over the same texts")
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
