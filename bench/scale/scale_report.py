"""The report of `bench/scale/search_scale.py`: the Markdown table of its saved results and their plot.

Split from the benchmark script so that each stays a readable size; it only formats numbers the
script measured.
"""

from __future__ import annotations

from pathlib import Path

from scale_http import http_lines
from scale_peers import kernel_table


def table(results: list[dict]) -> str:
    lines = []
    for facts in results:
        n = facts["n"]
        lat = facts["latency_ms"]
        lines.append(f"\n### N = {n:,}\n")
        run = facts.get("run", {})
        if run:
            changed = f", uncommitted changes to {', '.join(run['changed'])}" if run.get("changed") else ""
            lines.append(
                f"Measured at commit {run['commit']}{changed}, {run['at']}, in {run['wall_s'] / 60:.1f} min; "
                f"load average {run['load'][0]:.1f} before, {run['load_after'][0]:.1f} after (2 cores)."
            )
        made = [
            f"{label} {facts[key]:.0f} s (commit {facts[key.removesuffix('_s') + '_at']['commit']})"
            for label, key in (
                ("rows inserted", "insert_s"),
                ("index written", "index_write_s"),
                ("bm25s indexed", "bm25s_index_s"),
            )
            if key in facts and key.removesuffix("_s") + "_at" in facts
        ]
        if made:
            lines.append(f"Made once and kept: {'; '.join(made)}.")
        lines.append(
            f"Store {facts['db_bytes'] / n:,.0f} B/paragraph (text {facts['text_bytes'] / n:,.0f}, "
            f"vectors {facts['vector_bytes'] / n:,.0f}); index files {facts['index_bytes'] / n:,.0f} "
            f"B/paragraph; index written in {facts.get('index_write_s', float('nan')):.1f} s; cold start "
            f"(fresh process, first lexical answer) {min(facts['cold_start_s']):.3f} s; IVF "
            f"{facts['ivf_lists']} lists, nprobe {facts['nprobe']}, built in {facts['ivf_build_s']:.1f} s.\n"
        )
        if facts.get("index_parts"):
            lines.append(
                "Index parts beyond the main field (in the index files' total): "
                + ", ".join(
                    f"{name} {size / n:,.0f} B/paragraph" for name, size in facts["index_parts"].items()
                )
                + (
                    " — the store's rows overlap (made before their spans were consecutive);"
                    " no arm here reads it."
                    if "carried" in facts["index_parts"]
                    else ""
                )
                + "\n"
            )
        cpu = facts.get("cpu_ms", {})
        lines.append(
            "| arm | p50 ms | p95 ms | baseline | baseline p50 | ratio p50 "
            "| CPU p50 ms: arm / baseline, ratio |"
        )
        lines.append("|---|---|---|---|---|---|---|")
        pairs = [
            ("bm25 reader view", "bm25 all rows"),
            ("lexical ranking", "bm25s"),
            ("lexical", "bm25s + texts"),
            ("lexical", "bm25s"),
            ("lexical", "bm25s pool"),
            ("vector", "numpy flat"),
            ("vector", "sqlite-vec"),
            ("vector IVF", "numpy flat"),
            ("hybrid", "numpy flat + bm25s"),
            ("hybrid IVF", "numpy flat + bm25s"),
        ]
        for ours, base in pairs:
            if base not in lat or ours not in lat:  # an arm added since that size was last run
                continue
            on_cpu = (
                f"{cpu[ours]['p50']:.2f} / {cpu[base]['p50']:.2f}, {cpu[ours]['p50'] / cpu[base]['p50']:.2f}×"
                if ours in cpu and base in cpu
                else "—"
            )
            lines.append(
                f"| {ours} | {lat[ours]['p50']:.2f} | {lat[ours]['p95']:.2f} | {base} | "
                f"{lat[base]['p50']:.2f} | {lat[ours]['p50'] / lat[base]['p50']:.2f}× | {on_cpu} |"
            )
        lines.append(
            f"\nrecall@10 against the exact path: vector IVF {facts['recall_vector_ivf']:.3f}, "
            f"hybrid IVF (exact candidates) {facts['recall_hybrid_ivf']:.3f}; exact vector against numpy "
            f"{facts['recall_vector_vs_numpy']:.3f}."
        )
        if facts.get("recall_vector_ivf_by_nprobe"):
            lines.append(
                "Vector IVF at other nprobe (p50 / p95 ms, recall@10 against exact): "
                + "; ".join(
                    f"{k}: {lat[f'vector IVF nprobe {k}']['p50']:.2f} / "
                    f"{lat[f'vector IVF nprobe {k}']['p95']:.2f}, {r:.3f}"
                    for k, r in facts["recall_vector_ivf_by_nprobe"].items()
                )
                + "."
            )
        if "recall_vector_ivf_far" in facts:
            lines.append(
                f"Questions near no row (draws from another mixture, this bench's questions before "
                f"2026-12-02): vector IVF recall@10 {facts['recall_vector_ivf_far']:.3f} at the measured "
                f"nprobe; "
                + ", ".join(f"{k}: {r:.3f}" for k, r in facts["recall_vector_ivf_far_by_nprobe"].items())
                + "."
            )
        if "recall_peers" in facts:
            lines.extend(kernel_table(lat, facts["recall_peers"], facts.get("cpu_ms")))
        if "http" in facts:
            lines.extend(http_lines(facts["http"]))
    return "\n".join(lines)


def plot(results: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = [r["n"] for r in results]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name in (
        "lexical",
        "bm25s",
        "vector",
        "vector IVF",
        "numpy flat",
        "sqlite-vec",
        "hybrid",
        "hybrid IVF",
        "numpy flat + bm25s",
    ):
        if all(name in r["latency_ms"] for r in results):
            style = "--" if name in ("bm25s", "numpy flat", "sqlite-vec", "numpy flat + bm25s") else "-"
            ax.plot(sizes, [r["latency_ms"][name]["p50"] for r in results], style, marker="o", label=name)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("paragraphs")
    ax.set_ylabel("p50 latency, ms (in-process, question vector given)")
    ax.legend(fontsize=8)
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
