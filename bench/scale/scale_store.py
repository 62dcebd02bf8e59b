"""The synthetic N-paragraph collection bench/scale/search_scale.py measures: its data, store and index.

Paragraph j is SciFact abstract j mod 5,183 (title and text); from the second pass over the corpus on,
three words from a pool of 100,000 pseudo-words are appended, so texts differ. Ten paragraphs a
document. Vectors are synthetic unit vectors (384 dimensions) from a mixture of about sqrt(N)
Gaussian clusters around 32 super-centres. The rows are written straight into the store (as an
import would), then the build's index is written by the product's own `write_index`.

Populating is the slow part at a million rows (the IVF's k-means++ and its nprobe measurement inside
`write_index` most of all), so the store and index are kept under data/bench/scale/ and reused, and
what populating took is kept beside them (populated-N.json) for every later measurement to report.
"""

from __future__ import annotations

import gzip
import json
import os
import secrets
import time
from pathlib import Path

import numpy as np

from bench.common.results import provenance

ROOT = Path(__file__).resolve().parents[2]
# SCALE_BENCH_DIR: another folder of stores (to make a second store of a size beside a kept one).
WORK = Path(os.environ.get("SCALE_BENCH_DIR") or ROOT / "data" / "bench" / "scale")
DIMENSIONS = 384
PER_DOCUMENT = 10
BLOCK = 5000
GAP = "\n\n"  # between a document's paragraphs: their spans are consecutive, never overlapping


# --- data ----------------------------------------------------------------------------------------


def load_scifact(dataset: Path, questions: int) -> tuple[list[str], list[str]]:
    if not (dataset / "corpus.jsonl.gz").exists():
        raise SystemExit(f"no SciFact corpus.jsonl.gz in {dataset} (give --dataset or $SCIFACT)")
    texts = []
    with gzip.open(dataset / "corpus.jsonl.gz", "rt", encoding="utf-8") as handle:
        for line in handle:
            doc = json.loads(line)
            texts.append(f"{doc.get('title') or ''}\n\n{doc.get('text') or ''}".strip())
    asked = []
    with open(dataset / "queries.jsonl", encoding="utf-8") as handle:
        for line in handle:
            asked.append(json.loads(line)["text"])
            if len(asked) >= questions:
                break
    return texts, asked


def paragraph_text(j: int, corpus: list[str], rng_words: np.ndarray) -> str:
    base = corpus[j % len(corpus)]
    if j < len(corpus):
        return base
    words = rng_words[(j * 3) % len(rng_words) : (j * 3) % len(rng_words) + 3]
    return base + " " + " ".join(f"zq{w:05d}" for w in words)


class Mixture:
    """Unit vectors around ~sqrt(N) cluster centres, themselves around 32 super-centres."""

    def __init__(self, n: int, seed: int = 7):
        self.rng = np.random.default_rng(seed)
        supers = self._unit(self.rng.standard_normal((32, DIMENSIONS)))
        k = max(1, int(np.sqrt(n)))
        self.centres = self._unit(
            supers[self.rng.integers(0, 32, k)] + self.rng.standard_normal((k, DIMENSIONS)) * 0.06
        )
        self.spread = self.rng.uniform(0.6, 1.2, k)
        sizes = self.rng.lognormal(0, 1, k)
        self.weights = sizes / sizes.sum()

    @staticmethod
    def _unit(x):
        return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)

    def draw(self, count: int, rng: np.random.Generator | None = None) -> np.ndarray:
        """``count`` rows; ``rng`` draws them from the same centres without moving the store's own draws."""
        rng = self.rng if rng is None else rng
        which = rng.choice(len(self.centres), size=count, p=self.weights)
        noise = rng.standard_normal((count, DIMENSIONS)).astype(np.float32)
        return self._unit(
            self.centres[which] + noise * (self.spread[which, None] / np.sqrt(DIMENSIONS)) * 1.2
        )


# --- the store -----------------------------------------------------------------------------------


def setup_django(n: int) -> None:
    WORK.mkdir(parents=True, exist_ok=True)
    os.environ["DATABASE_URL"] = f"sqlite:///{WORK / f'scale-{n}.sqlite3'}"
    os.environ["INDEX_DIR"] = str(WORK / f"indexes-{n}")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    os.environ["EMBED_BACKEND"] = "local"
    # The HTTP phase's server refuses the public development key with DEBUG off; the bench's processes
    # (the one issuing the API key and the server checking it) share this one unless one is configured.
    if not os.environ.get("SECRET_KEY") and "SECRET_KEY=" not in _dotenv():
        os.environ["SECRET_KEY"] = secrets.token_urlsafe(50)
    import django

    django.setup()


def kept_index(n: int):
    """Django set up on the kept N-paragraph store, and its collection with the folder of its build's index
    (`services.indexes`), for the scripts that measure that index (index_size.py, index_fetch.py)."""
    setup_django(n)
    from collections_app.models import Collection, CollectionBuilt
    from collections_app.services.indexes import build_key, collection_root

    collection = Collection.objects.get(agent__agent_id="scale", name="scale")
    return collection, collection_root(collection.pk) / build_key(
        CollectionBuilt.objects.get(collection=collection)
    )


def _dotenv() -> str:
    path = ROOT / ".env"
    return path.read_text(encoding="utf-8") if path.exists() else ""


def insert_paragraphs(*, agent_id: str, collection, documents: list, n: int, corpus: list[str]) -> None:
    """The N rows, straight into the paragraph table with one executemany a block.

    An import's rows, as before, but without a model instance a row: at a million rows building and
    compiling ORM objects cost more than the SQL. The columns and every value not varied here come
    from the model itself (a template instance prepared by its own fields), so a column added to
    the table gets the value the ORM would give it.
    """
    from django.db import connection

    from collections_app.index.vector_codec import encode
    from collections_app.interchange import fingerprint
    from collections_app.models import Paragraph

    fields = [f for f in Paragraph._meta.concrete_fields if not f.primary_key]
    template = Paragraph(
        agent_id=agent_id,
        collection=collection,
        document=documents[0],
        ordinal=0,
        index=0,
        text="",
        start_char=0,
        end_char=0,
        token_count=None,
        fingerprint=fingerprint(""),
        embedding=b"",
    )
    prepared = {f.attname: f.get_db_prep_save(getattr(template, f.attname), connection) for f in fields}
    varied = ("document_id", "ordinal", "index", "text", "start_char", "end_char", "fingerprint", "embedding")
    missing = [name for name in varied if name not in prepared]
    if missing:
        raise SystemExit(
            f"the paragraph model has no {', '.join(missing)}: update bench/scale/scale_store.py"
        )
    quote = connection.ops.quote_name
    sql = (
        f"INSERT INTO {quote(Paragraph._meta.db_table)} ({', '.join(quote(f.column) for f in fields)}) "
        f"VALUES ({', '.join(['%s'] * len(fields))})"
    )
    slots = {f.attname: i for i, f in enumerate(fields)}
    base = [prepared[f.attname] for f in fields]
    # The varied values go through their fields too (a fingerprint may be stored as its digest's bytes).
    save = {f.attname: f.get_db_prep_save for f in fields if f.attname in varied}
    mixture = Mixture(n)
    words = np.random.default_rng(3).integers(0, 100_000, 3 * n + 3)
    end = 0
    with connection.cursor() as cursor:
        for block in range(0, n, BLOCK):
            count = min(BLOCK, n - block)
            vectors = mixture.draw(count)
            rows = []
            for offset in range(count):
                j = block + offset
                text = paragraph_text(j, corpus, words)
                # Consecutive spans of the document (a paragraph break between them), as a fixed-size
                # strategy leaves them: rows that all started at 0 overlapped one another, so the index
                # carried every row's text again (its `carried` part) and was written twice as slowly.
                start = 0 if j % PER_DOCUMENT == 0 else end + len(GAP)
                end = start + len(text)
                values = {
                    "document_id": documents[j // PER_DOCUMENT].pk,
                    "ordinal": j,
                    "index": j % PER_DOCUMENT,
                    "text": text,
                    "start_char": start,
                    "end_char": end,
                    "fingerprint": fingerprint(text),
                    "embedding": encode(vectors[offset]),
                }
                row = list(base)
                for name, value in values.items():
                    row[slots[name]] = save[name](value, connection)
                rows.append(row)
            cursor.executemany(sql, rows)


def insert_collection(n: int, corpus: list[str], model: str) -> tuple[object, dict]:
    """The agent "scale" and its N-paragraph collection "scale" in the store, written as an import would
    (reused when already built), and what it took."""
    from django.core.management import call_command
    from django.db import transaction
    from django.utils import timezone

    from collections_app.models import Agent, Collection, CollectionBuilt, Document
    from collections_app.services.agents import create_agent, create_collection

    facts = {}
    started = time.perf_counter()
    call_command("migrate", verbosity=0)
    facts["migrate_s"] = time.perf_counter() - started
    agent = Agent.objects.filter(agent_id="scale").first() or create_agent(agent_id="scale")[0]
    collection = Collection.objects.filter(agent=agent, name="scale").first()
    if collection is None or not CollectionBuilt.objects.filter(collection=collection).exists():
        collection = collection or create_collection(agent=agent, name="scale", method="fixed", size=4000)
        started, at = time.perf_counter(), provenance()  # the code that runs is the code at the start
        with transaction.atomic():
            documents = Document.objects.bulk_create(
                [
                    Document(
                        collection=collection,
                        name=f"d{d:07d}.md",
                        paragraph_count=PER_DOCUMENT,
                        built_method="fixed",
                        built_model=model,
                    )
                    for d in range((n + PER_DOCUMENT - 1) // PER_DOCUMENT)
                ],
                batch_size=2000,
            )
            if not all(d.pk for d in documents):
                documents = list(Document.objects.filter(collection=collection).order_by("name"))
            insert_paragraphs(
                agent_id=agent.agent_id, collection=collection, documents=documents, n=n, corpus=corpus
            )
            CollectionBuilt.objects.update_or_create(
                collection=collection,
                defaults=dict(
                    agent_id=agent.agent_id,
                    model=model,
                    dimensions=DIMENSIONS,
                    method="fixed",
                    passages=n,
                    built_at=timezone.now(),
                    refused=[],
                ),
            )
        facts["insert_s"] = time.perf_counter() - started
        facts["insert_at"] = at
    return collection, facts


def populate(n: int, corpus: list[str], model: str) -> dict:
    """The store and index of an N-paragraph collection (reused when already there), and what making
    them took (kept in populated-N.json, so a later run still reports it)."""

    from collections_app.models import CollectionBuilt
    from collections_app.services.indexes import build_key, collection_root, write_index

    record = WORK / f"populated-{n}.json"
    facts = json.loads(record.read_text()) if record.exists() else {}
    collection, made = insert_collection(n, corpus, model)
    facts.update(made)
    if "insert_s" in made:
        record.write_text(json.dumps(facts, indent=1))
    built = CollectionBuilt.objects.get(collection=collection)
    folder = collection_root(collection.pk) / build_key(built)
    meta = folder / "meta.json"
    before = meta.stat().st_mtime_ns if meta.exists() else None
    started, at = time.perf_counter(), provenance()
    write_index(collection=collection)  # returns at once when the index there is usable
    elapsed = time.perf_counter() - started
    if meta.stat().st_mtime_ns != before:  # written now (none was there, or the one there was unusable)
        facts["index_write_s"], facts["index_write_at"] = elapsed, at
        record.write_text(json.dumps(facts, indent=1))
    facts["index_bytes"] = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
    facts["index_files"] = {p.name: p.stat().st_size for p in folder.iterdir() if p.is_file()}
    # Further lexical fields written beside the main one; `carried` means the store's rows overlap
    # (a store made before insert_paragraphs wrote consecutive spans).
    facts["index_parts"] = {
        p.name: sum(f.stat().st_size for f in p.iterdir()) for p in folder.iterdir() if p.is_dir()
    }
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # the file's size then holds every row
        cursor.execute("SELECT sum(length(text)), sum(length(embedding)) FROM agents_chunks")
        text_bytes, vector_bytes = cursor.fetchone()
    facts["db_bytes"] = Path(os.environ["DATABASE_URL"].removeprefix("sqlite:///")).stat().st_size
    facts["text_bytes"], facts["vector_bytes"] = int(text_bytes), int(vector_bytes)
    return facts
