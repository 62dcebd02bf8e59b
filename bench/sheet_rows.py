"""How a spreadsheet's rows should be written for search: Markdown table rows or ``header: value`` lines.

    python bench/sheet_rows.py                 # the local MiniLM embedder, hybrid, vector and lexical

Two made tables (a staff directory of 300 people and a parts catalogue of 200 parts, from a seeded
random stream) are written both ways and built as two collections through the real build:

- ``markdown``: the tables as CSV files, read by `collections_app.text.sheets` (Markdown table rows
  in blocks of at most 1,500 characters, each repeating the header row);
- ``fields``: the same rows as Markdown files, one block per row of ``header: value`` lines under
  the table's heading (the other layout issue 25 names).

Sixty questions, each asking for a value that occurs once (an extension, a staff number, a part
number) by naming the row the way a person would ("What is Priya Natarajan's phone extension?").
A question is found at k when the best-ranked paragraph holding its marker is among the first k
(`harness.rank_all`: the whole collection ranked, floor 0, around 0). The rendering with the better
found@5 (hybrid) is the one the reader uses; docs/decisions.md has the figures.
"""

from __future__ import annotations

import argparse
import csv
import random
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import harness  # noqa: E402

FIRST = [
    "Priya",
    "Omar",
    "Lena",
    "Tomasz",
    "Aiko",
    "Mateo",
    "Ingrid",
    "Kwame",
    "Sofia",
    "Ravi",
    "Elif",
    "Jonas",
    "Chen",
    "Amara",
    "Lucas",
    "Nadia",
    "Pavel",
    "Yuki",
    "Helena",
    "Diego",
]
LAST = [
    "Natarajan",
    "Haddad",
    "Fischer",
    "Kowalski",
    "Tanaka",
    "Silva",
    "Larsen",
    "Mensah",
    "Rossi",
    "Iyer",
    "Demir",
    "Berg",
    "Wei",
    "Okafor",
    "Moreau",
    "Petrova",
    "Novak",
    "Sato",
    "Lindqvist",
    "Ortega",
]
DEPARTMENTS = ["Finance", "Legal", "Sales", "Support", "Research", "Facilities", "Marketing", "Security"]
CITIES = ["Lyon", "Rotterdam", "Krakow", "Osaka", "Porto", "Aarhus", "Accra", "Turin"]
PARTS = [
    "hydraulic pump",
    "pressure valve",
    "drive belt",
    "bearing housing",
    "control board",
    "fan assembly",
    "sensor cable",
    "gear motor",
    "filter cartridge",
    "relay module",
]
MAKERS = ["Kestrel", "Norda", "Valmet", "Orion", "Tamura", "Brixton"]
WAREHOUSES = ["North depot", "Harbour store", "East yard", "Central hall"]


def tables(seed: int = 25) -> dict[str, list[list[str]]]:
    rng = random.Random(seed)
    people = rng.sample([(f, la) for f in FIRST for la in LAST], 300)
    extensions = rng.sample(range(2000, 9999), 300)
    staff = [["Name", "Staff number", "Department", "Office", "Phone extension", "Start year"]]
    for index, (first, last) in enumerate(people):
        staff.append(
            [
                f"{first} {last}",
                f"S-{10400 + index * 7}",
                rng.choice(DEPARTMENTS),
                rng.choice(CITIES),
                f"x{extensions[index]}",
                str(rng.randint(1998, 2026)),
            ]
        )
    kinds = rng.sample([(m, p) for m in MAKERS for p in PARTS], 60)
    parts = [["Part number", "Part", "Maker", "Size", "Warehouse", "Unit price (EUR)"]]
    for index in range(200):
        maker, part = kinds[index % len(kinds)]
        size = ["small", "medium", "large", "extra large"][index // 60 % 4] if index < 240 else "small"
        parts.append(
            [
                f"PN-{73000 + index * 13}",
                part,
                maker,
                size,
                rng.choice(WAREHOUSES),
                f"{rng.randint(4, 900)}.{rng.randint(0, 99):02d}",
            ]
        )
    return {"staff": staff, "parts": parts}


def questions(data: dict[str, list[list[str]]], seed: int = 26) -> list[dict]:
    rng = random.Random(seed)
    asked = []
    for row in rng.sample(data["staff"][1:], 20):
        asked.append({"question": f"What is {row[0]}'s phone extension?", "answer": row[4]})
    for row in rng.sample(data["staff"][1:], 20):
        asked.append({"question": f"Which staff number does {row[0]} from {row[2]} have?", "answer": row[1]})
    # Parts repeat (maker, part) across sizes, so a question names all three, as a buyer would.
    seen, chosen = set(), []
    for row in rng.sample(data["parts"][1:], 200):
        key = (row[1], row[2], row[3])
        if key not in seen and sum(1 for r in data["parts"][1:] if (r[1], r[2], r[3]) == key) == 1:
            seen.add(key)
            chosen.append(row)
        if len(chosen) == 20:
            break
    for row in chosen:
        question = f"What is the part number of the {row[3]} {row[2]} {row[1]}?"
        asked.append({"question": question, "answer": row[0]})
    return asked


def write_markdown(folder: Path, data: dict[str, list[list[str]]]) -> None:
    for name, rows in data.items():
        with (folder / f"{name}.csv").open("w", newline="", encoding="utf-8") as out:
            csv.writer(out).writerows(rows)


def write_fields(folder: Path, data: dict[str, list[list[str]]]) -> None:
    for name, rows in data.items():
        header, body = rows[0], rows[1:]
        blocks = ["\n".join(f"{h}: {v}" for h, v in zip(header, row, strict=True)) for row in body]
        (folder / f"{name}.md").write_text(f"# {name}\n\n" + "\n\n".join(blocks) + "\n", encoding="utf-8")


def found(agent, collection, asked: list[dict], mode: str) -> dict[int, float]:
    ranks = []
    for item in asked:
        ranked = harness.rank_all(agent, collection, item["question"], mode=mode)
        rank, _score = ranked.best_holding(item["answer"])
        ranks.append(rank)
    return {k: sum(1 for r in ranks if r is not None and r < k) / len(ranks) for k in (1, 5)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", default="sheet-rows")
    args = parser.parse_args()
    harness.setup(args.store)
    data = tables()
    asked = questions(data)
    with tempfile.TemporaryDirectory() as work:
        results = {}
        for layout, write in (("markdown", write_markdown), ("fields", write_fields)):
            folder = Path(work) / layout
            folder.mkdir()
            write(folder, data)
            agent, collection = harness.built_collection(f"rows-{layout}", folder)
            results[layout] = {mode: found(agent, collection, asked, mode) for mode in harness.MODES}
    print(f"{len(asked)} questions; found@1 / found@5 (floor 0, around 0)")
    for layout, by_mode in results.items():
        cells = "  ".join(f"{mode} {f[1]:.2f}/{f[5]:.2f}" for mode, f in by_mode.items())
        print(f"{layout:9} {cells}")


if __name__ == "__main__":
    main()
