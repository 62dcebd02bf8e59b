"""The LoCoMo bench's report: its tables and its plot (bench/memory/memory_locomo.py)."""

from __future__ import annotations

from pathlib import Path

from locomo_data import BUDGETS, CATEGORIES, CATEGORY_NAMES, MOSTS, Tally, settings_asked


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
    best = {
        name: max((tally.figures(m, name)[0], m) for m in tally.methods() if m != "ragsite") for name in names
    }
    lines += [
        "",
        "ragsite minus the best baseline (points): "
        + ", ".join(
            f"{name} {tally.figures('ragsite', name)[0] - best[name][0]:+.1f} ({best[name][1]})"
            for name in names
        ),
    ]
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
            f"recall over HTTP at most 5 (default budget): p50 {facts['recall']['p50_ms']:.1f} ms, "
            f"p95 {facts['recall']['p95_ms']:.1f} ms over {facts['recall']['questions']} questions"
        ]
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
