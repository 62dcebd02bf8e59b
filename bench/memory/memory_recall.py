"""Memory recall: facts planted late in long records (ranked by best node), and recall latency at scale.

    python bench/memory/memory_recall.py planted [--embedder local|hash]
    python bench/memory/memory_recall.py scale [--memories 100000] [--questions 50] [--embedder local|hash]

``planted``: 30 facts, each the last sentence of a long record (2,000–3,000 characters of unrelated
diary prose before it, so past a 256-token window), among 200 short records about other things;
one paraphrased question per fact. Two sets: THINGS (development: chose the passage window) and
HELD_OUT (30 other facts and questions, written before any miss was read; checks the choice). Recall is asked
twice in the same run: once before any node is built (what ranking by the records alone gives: the rule seed
002 first wrote) and once after (a divided record ranked by its best node). Prints top-1 and top-5 for both,
and how often the top-1 excerpt quotes the node that holds the fact.

``scale``: one agent with --memories short records (random unit vectors of the embedder's width
stand in for their embeddings: embedding 100,000 texts would take hours here; texts are real
sentences, so BM25 is real), then --questions recalls: the first (which builds the agent's cached
index), then warm ones, with the question embedded by the embedder (p50/p95 of the whole call, of
its embedding and of the rest), every third followed by a stored memory and the recall after it
(the index updated in place), against the same recall with the cache dropped (reading every row)
in the same process, interleaved, and the floor of any exact vector recall (embed the question,
one ``M @ q`` over the same vectors, argpartition) for a ratio.

The store is a throw-away SQLite file in a temporary folder.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

THINGS = [
    (
        "boathouse key",
        "hangs on a hook inside the red toolbox in the garage",
        "Where is the key to the boathouse?",
    ),
    (
        "wifi password",
        "is written on the back of the kitchen calendar",
        "What is the wireless network password?",
    ),
    ("passport", "is in the fireproof box under the guest bed", "Where did I put my passport?"),
    ("grandmother's ring", "is wrapped in a blue cloth in the sewing drawer", "Where is grandma's ring?"),
    (
        "car insurance renewal",
        "is due on the fourteenth of March",
        "When do I need to renew the car insurance?",
    ),
    ("dentist appointment", "was moved to Thursday at half past four", "When is my dentist visit?"),
    (
        "bike lock code",
        "is 4-7-1-9, the same as the old shed",
        "What's the combination for the bicycle lock?",
    ),
    (
        "spare tent pegs",
        "are in the green crate on the top shelf of the loft",
        "Where are the extra tent stakes?",
    ),
    ("neighbour's cat", "is called Biscuit and eats only dry food", "What is the name of the cat next door?"),
    ("boiler service", "is done by a company called Heatwise every October", "Who services the boiler?"),
    ("library books", "must go back by the second of May", "When are the library books due?"),
    (
        "tax documents",
        "are in the grey folder on the left side of the filing cabinet",
        "Where are my tax papers?",
    ),
    (
        "sourdough starter",
        "needs feeding every Sunday with rye flour",
        "How often do I feed the sourdough culture?",
    ),
    (
        "school pickup",
        "on Wednesdays is done by Aunt Mira",
        "Who collects the kids from school on Wednesday?",
    ),
    ("garden hose", "leaks at the joint near the outdoor tap", "Where does the hose leak?"),
    ("gym membership", "can be cancelled with one month's notice by email", "How do I cancel the gym?"),
    ("water meter", "is under a metal lid beside the front gate", "Where is the water meter located?"),
    ("landlord's phone number", "is 0161 496 0732", "How do I call the landlord?"),
    ("allergy", "that Tom has is to cashew nuts, not peanuts", "What is Tom allergic to?"),
    ("fuse box", "is behind the coats in the hall cupboard", "Where is the electrical fuse board?"),
    ("wedding anniversary", "is on the ninth of September", "When is our anniversary?"),
    (
        "printer ink",
        "is the 302 XL cartridge, black and colour",
        "Which ink cartridge does the printer take?",
    ),
    ("piano lesson", "has moved to Saturday mornings at ten", "When are the piano classes now?"),
    ("recycling bins", "go out every other Tuesday evening", "When should the recycling be put out?"),
    (
        "camera charger",
        "was left in the side pocket of the hiking backpack",
        "Where is the charger for the camera?",
    ),
    ("rent", "goes up to 950 a month from June", "How much will the rent be from June?"),
    (
        "vet",
        "said the dog should lose two kilos before summer",
        "What did the vet say about the dog's weight?",
    ),
    ("holiday cottage", "is booked for the first week of August in Cornwall", "When is the cottage holiday?"),
    (
        "smoke alarm battery",
        "was replaced on the twentieth of January",
        "When did I change the smoke detector battery?",
    ),
    (
        "emergency cash",
        "is in an envelope taped under the bottom kitchen drawer",
        "Where is the emergency money?",
    ),
]
# Held out: written before the misses of THINGS were read; never used to choose anything.
HELD_OUT = [
    (
        "spare house key",
        "is under the third flowerpot on the back step",
        "Where can I find the extra key to the house?",
    ),
    ("plumber", "is a woman called Dana who charges 60 an hour", "Who fixes our pipes?"),
    (
        "kids' vaccination cards",
        "are clipped inside the red health binder",
        "Where are the children's immunisation records?",
    ),
    (
        "electric car charger",
        "trips the breaker if the dryer is running",
        "Why does the EV charging point keep cutting out?",
    ),
    ("council tax", "is paid by direct debit on the first of each month", "How is the council tax paid?"),
    ("Sam's shoe size", "is a 34 in European sizes", "What size shoes does Sam wear?"),
    (
        "bank safe deposit box",
        "is at the branch on Mill Street, number 212",
        "Where is the safety deposit box?",
    ),
    (
        "greenhouse heater",
        "runs on the small propane bottles from the hardware shop",
        "What fuel does the greenhouse heater need?",
    ),
    ("mortgage fixed rate", "ends in November next year", "When does the fixed mortgage deal run out?"),
    (
        "router admin page",
        "uses the login admin and the serial number on the sticker",
        "How do I log into the modem settings?",
    ),
    (
        "Grandad's medication",
        "is two tablets at breakfast and one at bedtime",
        "How many pills does grandpa take and when?",
    ),
    (
        "roof leak",
        "comes from the cracked tile above the bathroom window",
        "What is causing the drip in the ceiling?",
    ),
    ("babysitter", "is free on Fridays but not on Saturdays", "Which evenings can the sitter come?"),
    ("washing machine warranty", "runs out at the end of July", "Until when is the washer under guarantee?"),
    ("allotment plot", "is number 17, at the far end near the compost heaps", "Which garden plot is ours?"),
    ("passport photos", "are in the envelope stuck to the fridge door", "Where did I leave the ID pictures?"),
    (
        "choir rehearsal",
        "starts at seven thirty in the church hall",
        "What time does singing practice begin?",
    ),
    (
        "car's tyre pressure",
        "should be 2.3 bar at the front and 2.1 at the back",
        "How much air do the car tires need?",
    ),
    (
        "school trip money",
        "has to be paid online before Friday",
        "When is the deadline for the field trip payment?",
    ),
    (
        "Christmas decorations",
        "are in the three brown boxes behind the water tank",
        "Where are the festive ornaments stored?",
    ),
    (
        "office door code",
        "is 2580 followed by the hash key",
        "What do I type to get into the office building?",
    ),
    ("lawn feed", "should only go down after it has rained", "When should I fertilise the grass?"),
    (
        "Lucy's birthday present",
        "is hidden on top of the wardrobe in the spare room",
        "Where did I hide Lucy's gift?",
    ),
    (
        "solar panel inverter",
        "shows a red light when it needs resetting",
        "How can I tell the solar inverter needs a reset?",
    ),
    (
        "swimming lessons",
        "are on Mondays at the leisure centre pool",
        "Where and when does swim class happen?",
    ),
    ("old laptop", "was given to cousin Ravi for his studies", "Who has my previous computer?"),
    ("caravan storage fee", "is 400 a year, paid each April", "How much does it cost to store the caravan?"),
    (
        "dog's microchip number",
        "is on the pink card in the pet folder",
        "Where is the pet's chip ID written?",
    ),
    ("chimney", "was last swept in October by a man named Pete", "When was the fireplace flue last cleaned?"),
    (
        "best route to the airport",
        "avoids the ring road and goes through Eastfield",
        "Which way should I drive to the airport?",
    ),
]
DIARY = [
    "We walked along the canal after lunch and watched the narrowboats pass.",
    "The market was busy and the bakery had run out of the seeded loaves again.",
    "It rained most of the afternoon, so we stayed in and played cards.",
    "My sister phoned to talk about her new job at the museum.",
    "I finished the novel about the lighthouse keeper; the ending was sad.",
    "The tomatoes on the balcony are finally turning red.",
    "We tried the new Vietnamese place on the corner and the soup was excellent.",
    "The train was delayed by twenty minutes because of a signal fault.",
    "I spent the morning clearing leaves from the gutters.",
    "There was a concert in the park with a brass band and a choir.",
    "The kids built a fort out of cushions in the living room.",
    "I repainted the fence panel that the storm had knocked loose.",
    "Work was quiet; most of the team was away at a conference.",
    "We drove to the coast and ate chips on the harbour wall.",
    "The power went out for an hour during the thunderstorm.",
    "I started learning a few words of Portuguese before the trip.",
]
# Short records about other things: what a long store is mostly made of.
SUBJECTS = [
    "the electricity bill",
    "new running shoes",
    "the team offsite",
    "a birthday card for Leo",
    "the broken blender",
    "oat milk",
    "the quarterly report",
    "Spanish homework",
    "the bus timetable",
    "a podcast about volcanoes",
    "the lawn mower",
    "concert tickets",
    "the laptop update",
    "a pasta recipe",
    "the parking permit",
    "winter tyres",
    "the book club",
    "a yoga class",
    "the photo album",
    "the fish tank",
]
VERBS = [
    "Paid for {s} today.",
    "Need to sort out {s} this week.",
    "Mia reminded me about {s}.",
    "Finally dealt with {s}.",
    "Read an article about {s}.",
    "Forgot {s} again.",
    "Booked {s} online.",
    "Talked to Dad about {s}.",
    "Added {s} to the shopping list.",
    "Spent an hour on {s}.",
]


def planted_corpus(seed: int = 0, things=THINGS) -> tuple[list[tuple[str, str, str]], list[str]]:
    """([(long record, fact sentence, question)] × 30, [200 short distractors]), deterministic."""
    rng = random.Random(seed)
    planted = []
    for thing, detail, question in things:
        fact = f"Note to self: the {thing} {detail}."
        prose: list[str] = []
        while sum(len(s) + 1 for s in prose) < rng.randint(2000, 3000):
            prose.append(rng.choice(DIARY))
        planted.append((" ".join(prose) + "\n\n" + fact, fact, question))
    distractors = [verb.format(s=subject) for subject in SUBJECTS for verb in VERBS]
    rng.shuffle(distractors)
    return planted, distractors[:200]


def setup_django(embedder: str) -> None:
    scratch = Path(tempfile.mkdtemp(prefix="memory-recall-"))
    os.environ["DATABASE_URL"] = f"sqlite:///{scratch / 'bench.sqlite3'}"
    os.environ["EMBED_BACKEND"] = embedder
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def run_planted(passage_window: int | None) -> None:
    """Both fact sets, each in its own agent: the development set (THINGS, which chose
    PASSAGE_WINDOW) and the held-out one (HELD_OUT, never used to choose anything)."""
    from bench.common import results
    from collections_app.services.agents import create_agent
    from memory_app import nodes, services
    from memory_app.models import MEMORY

    if passage_window is not None:  # 256 or more: each node is its own only passage (the rule before)
        nodes.PASSAGE_WINDOW = passage_window
    print(f"# passage window {nodes.PASSAGE_WINDOW} tokens")
    figures = {"passage_window": nodes.PASSAGE_WINDOW, "sets": {}}
    for name, seed, things in (("development", 0, THINGS), ("held out", 1, HELD_OUT)):
        agent = create_agent(agent_id=f"planted-{seed}")[0]
        planted, distractors = planted_corpus(seed, things)
        ids = [services.store_memory(agent=agent, text=text)[0].pk for text, _fact, _question in planted]
        for text in distractors:
            services.store_memory(agent=agent, text=text)

        def ask(agent=agent, planted=planted, ids=ids) -> tuple[int, int, int]:
            top1 = top5 = quoted = 0
            for memory_id, (_text, fact, question) in zip(ids, planted, strict=True):
                excerpts = services.recall(agent=agent, query=question, most=5)["excerpts"]
                found = [r["id"] for r in excerpts if r["kind"] == MEMORY]
                first = bool(excerpts) and excerpts[0]["id"] == memory_id
                top1 += first
                top5 += memory_id in found
                quoted += first and fact in excerpts[0]["text"]
            return top1, top5, quoted

        for memory_id in ids:  # each record's own vector, as the task its store queued makes it
            services.embed_vector(MEMORY, memory_id)
        before = ask()
        started = time.perf_counter()
        for memory_id in ids:
            services.build_nodes(MEMORY, memory_id)
        built = time.perf_counter() - started
        after = ask()
        n = len(ids)
        print(
            f"## {name}: {n} planted facts among {len(distractors)} short distractors; nodes built in "
            f"{built:.1f} s"
        )
        print(
            f"records only (no nodes): top-1 {before[0] / n:.0%}, top-5 {before[1] / n:.0%}, "
            f"fact quoted {before[2] / n:.0%}"
        )
        print(
            f"by best node:            top-1 {after[0] / n:.0%}, top-5 {after[1] / n:.0%}, "
            f"fact quoted {after[2] / n:.0%}"
        )
        shares = ("top1", "top5", "quoted")
        figures["sets"][name] = {
            "facts": n,
            "nodes_built_s": built,
            "records_only": {key: count / n for key, count in zip(shares, before, strict=True)},
            "by_best_node": {key: count / n for key, count in zip(shares, after, strict=True)},
        }
    print("# written to", results.save("memory_planted", figures))


def run_scale(memories: int, questions: int) -> None:
    import importlib

    import numpy as np

    from collections_app.services.agents import create_agent
    from memory_app import services
    from memory_app.models import Memory
    from ragsite import embedding

    recall_module = importlib.import_module("memory_app.services.recall")  # the module, not the function

    embedder = embedding.get_embedder()
    width = embedder.dimensions
    agent = create_agent(agent_id="scale")[0]
    rng = np.random.default_rng(0)
    sentences = DIARY + [verb.format(s=subject) for subject in SUBJECTS for verb in VERBS]
    started = time.perf_counter()
    for start in range(0, memories, 5000):
        count = min(5000, memories - start)
        vectors = rng.standard_normal((count, width)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        Memory.objects.bulk_create(
            Memory(
                agent=agent,
                text=f"{sentences[(start + i) % len(sentences)]} (entry {start + i})",
                embedding=vectors[i].astype("<f4").tobytes(),
                embedding_model=embedder.model,
            )
            for i in range(count)
        )
    print(
        f"# {memories} memories written in {time.perf_counter() - started:.1f} s; embedder {embedder.model}"
    )
    asked = [q for _t, _d, q in THINGS][:questions]
    # Each recall's own embedding time, measured inside it, so "the rest" is the same call's remainder.
    embedded: list[float] = []
    embed = embedder.embed

    def timed_embed(texts):
        started = time.perf_counter()
        try:
            return embed(texts)
        finally:
            embedded.append(time.perf_counter() - started)

    embedder.embed = timed_embed
    started = time.perf_counter()
    services.recall(agent=agent, query=asked[0], most=5)
    print(f"first recall (builds the cached index): {time.perf_counter() - started:.2f} s")
    warm, rest, after_write, floor, cold = [], [], [], [], []
    rounds = max(1, questions // len(asked))
    for round_ in range(rounds):
        for n, question in enumerate(asked):
            embedded.clear()
            started = time.perf_counter()
            services.recall(agent=agent, query=question, most=5)
            warm.append(time.perf_counter() - started)
            rest.append(warm[-1] - sum(embedded))
            # The floor of any exact vector recall: embed the question, one M @ q, argpartition.
            matrix = recall_module._cache[agent.pk].index.records.matrix.array
            started = time.perf_counter()
            scores = matrix @ embed([question])[0]
            np.argpartition(-scores, 5)[:5]
            floor.append(time.perf_counter() - started)
            if n % 3 == 0:  # a write (embedded before the clock starts), then the next recall
                services.store_memory(agent=agent, text=f"{question} (written at round {round_})")
                started = time.perf_counter()
                services.recall(agent=agent, query=question, most=5)
                after_write.append(time.perf_counter() - started)
            if len(cold) < 3:  # reading every row is slow: a few are enough for the ratio
                recall_module.forget_agent(agent.pk)
                started = time.perf_counter()
                services.recall(agent=agent, query=question, most=5)
                cold.append(time.perf_counter() - started)
    embedder.embed = embed

    def ms(values, q=50):
        return 1000 * (statistics.median(values) if q == 50 else statistics.quantiles(values, n=20)[18])

    embedding_only = [w - r for w, r in zip(warm, rest, strict=True)]
    print(f"recall, cached index: p50 {ms(warm):.1f} ms, p95 {ms(warm, 95):.1f} ms, {len(warm)} recalls")
    print(
        f"  of which embedding the question: p50 {ms(embedding_only):.1f} ms, p95 "
        f"{ms(embedding_only, 95):.1f} ms"
    )
    print(f"  and the rest: p50 {ms(rest):.1f} ms, p95 {ms(rest, 95):.1f} ms")
    print(
        f"recall right after a write (index updated in place): p50 {ms(after_write):.1f} ms, "
        f"p95 {ms(after_write, 95):.1f} ms, {len(after_write)} writes"
    )
    print(
        f"floor (embed + M @ q + argpartition on the same vectors): p50 {ms(floor):.1f} ms; "
        f"recall / floor {statistics.median(warm) / statistics.median(floor):.2f}x"
    )
    print(
        f"recall reading every row (no cache): p50 {ms(cold):.0f} ms over {len(cold)}; "
        f"ratio {statistics.median(cold) / statistics.median(warm):.0f}x"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("what", choices=["planted", "scale"])
    parser.add_argument("--embedder", default="local", choices=["local", "hash"])
    parser.add_argument("--memories", type=int, default=100_000)
    parser.add_argument("--questions", type=int, default=60)
    parser.add_argument(
        "--passage-window",
        type=int,
        default=None,
        help="planted: passages of this many tokens (default: memory_app.nodes.PASSAGE_WINDOW)",
    )
    args = parser.parse_args()
    setup_django(args.embedder)
    if args.what == "planted":
        run_planted(args.passage_window)
    else:
        run_scale(args.memories, args.questions)


if __name__ == "__main__":
    main()
