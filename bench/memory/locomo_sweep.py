"""memory_locomo.py's in-process sweep: ragsite's recall over the bench's store under variants of
`memory_app.conf`, and the summary of a tally per part of the development split (all, tuning, check)
with the margin over the best baseline at each budget.

Imported by memory_locomo.py (which sets up Django and the store); not run alone.
"""

from __future__ import annotations

from locomo_data import PARTS, Tally, found, settings_asked

SWEEP_WEIGHTS = (0.1, 0.2, 0.25, 0.3, 0.4, 0.52, 0.6)
SWEEP_EXPONENTS = (0.0, 0.15)


def parse_variant(text: str) -> dict:
    """``NAME=value,NAME=value`` (names of `memory_app.conf`, values Python literals) -> a dict."""
    import ast

    variant = {}
    for part in filter(None, text.split(";")):
        name, _, value = part.partition("=")
        variant[name.strip()] = ast.literal_eval(value.strip())
    return variant


def sweep(conversations, agents: dict, variants: list[dict], baseline: Tally | None = None) -> dict:
    """ragsite's recall in this process (the same store and code as the server) under each variant of
    `memory_app.conf` (a dict of its names and values): evidence recall at each budget and at most 1
    and 5, and, with the baselines' `baseline` tally of the same questions, the margin over the best
    of them at each budget, per part of the split, with intervals. What chose the defaults."""
    from memory_app import conf, services

    results = {}
    reference: Tally | None = None
    asked = [(name, most, max_chars) for name, most, max_chars in settings_asked() if name in ASKED_IN_SWEEP]
    for variant in variants:
        original = {name: getattr(conf, name) for name in variant}
        try:
            for name, value in variant.items():
                setattr(conf, name, value)
            tally = Tally()
            if baseline is not None:
                tally.scores.update(
                    {key: rows for key, rows in baseline.scores.items() if key[0] != "ragsite"}
                )
            for conversation in conversations:
                for question in conversation.questions:
                    for name, most, max_chars in asked:
                        answer = services.recall(
                            agent=agents[conversation.name],
                            query=question.question,
                            most=most,
                            max_chars=max_chars,
                        )
                        tally.add(
                            "ragsite",
                            name,
                            question.category,
                            found(conversation, question, answer["excerpts"]),
                            conversation.name,
                        )
        finally:
            for name, value in original.items():
                setattr(conf, name, value)
        key = ";".join(f"{name}={value!r}" for name, value in variant.items()) or "defaults"
        results[key] = summary(tally, [name for name, _m, _c in asked])
        if reference is None:
            reference = tally
        else:
            results[key]["versus_first"] = versus(tally, reference, [name for name, _m, _c in asked])
        print(f"== {key}", flush=True)
        for part, row in ((part, results[key][part]) for part in ("all", *PARTS)):
            print(
                f"  {part:<7} "
                + " ".join(f"{name} {value:.1f}" for name, value in row["recall"].items())
                + (
                    "  | margin "
                    + " ".join(
                        f"{name} {m[0]:+.1f} [{m[1]:+.1f},{m[2]:+.1f}]" for name, m in row["margin"].items()
                    )
                    + "  | multi-hop "
                    + " ".join(f"{name} {m[0]:+.1f}" for name, m in row["multi_hop"].items())
                    if row["margin"]
                    else ""
                ),
                flush=True,
            )
            if "versus_first" in results[key]:
                print(
                    f"  {'':<7} against the first variant: "
                    + " ".join(
                        f"{name} {m[0]:+.1f} [{m[1]:+.1f},{m[2]:+.1f}]"
                        for name, m in results[key]["versus_first"][part].items()
                    ),
                    flush=True,
                )
    return results


def versus(tally: Tally, reference: Tally, names: list[str]) -> dict:
    """Per part (all, tuning, check) and setting: ragsite under this variant minus ragsite under the first
    one (the reference), question by question, with its paired 95 % bootstrap interval."""
    paired = Tally()
    for name in names:
        paired.scores[("ragsite", name)] = tally.scores[("ragsite", name)]
        paired.scores[("reference", name)] = reference.scores[("ragsite", name)]
    return {
        part or "all": {
            name: paired.interval("ragsite", name, part=part, minus="reference") for name in names
        }
        for part in (None, *PARTS)
    }


ASKED_IN_SWEEP = ("1k", "2k", "4k", "8k", "most 1", "most 5", "default")


def summary(tally: Tally, names: list[str]) -> dict:
    """Per part (all, tuning, check): ragsite's recall at each setting, and at each budget its margin over
    the best baseline (estimate, low, high) over categories 1-4 and on multi-hop alone."""
    out = {}
    budgets = [name for name in names if name.endswith("k")]
    has_baselines = len(tally.methods()) > 1
    for part in (None, *PARTS):
        row = {"recall": {name: tally.figures("ragsite", name, part=part)[0] for name in names}}
        row["margin"] = (
            {
                name: tally.interval("ragsite", name, part=part, minus=tally.best_baseline(name, part=part))
                for name in budgets
            }
            if has_baselines
            else {}
        )
        row["multi_hop"] = (
            {
                name: tally.interval("ragsite", name, 1, part, minus=tally.best_baseline(name, 1, part))
                for name in budgets
            }
            if has_baselines
            else {}
        )
        out[part or "all"] = row
    return out
