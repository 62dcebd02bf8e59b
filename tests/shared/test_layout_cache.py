"""The shared, memory-mapped layout of the local model's weights (`ragsite.embedders.layout_cache`).

Most tests use a tiny random BERT written as safetensors here; the `model` ones use the bundled
all-MiniLM-L6-v2. Every check compares against the private layout, bit for bit: the cache may save
memory but must never change an embedding.
"""

import json
import logging
import os
import threading
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file

from ragsite.embedders import LocalEmbedder, bert, build_embedder, default_model_dir, layout_cache
from tests.shared.test_embedders import REFERENCE

HEADS, HIDDEN, INNER, VOCAB, POSITIONS, LAYERS = 2, 8, 16, 30, 12, 2
IDS = np.array([1, 5, 7, 2, 1, 9, 3, 3, 2], dtype=np.int64)
LENGTHS = np.array([4, 5], dtype=np.int64)


def _tiny_bert(path: Path, seed: int = 0) -> Path:
    rng = np.random.default_rng(seed)

    def tensor(*shape: int) -> np.ndarray:
        return rng.standard_normal(shape).astype(np.float32)

    tensors = {
        "embeddings.word_embeddings.weight": tensor(VOCAB, HIDDEN),
        "embeddings.position_embeddings.weight": tensor(POSITIONS, HIDDEN),
        "embeddings.token_type_embeddings.weight": tensor(2, HIDDEN),
        "embeddings.LayerNorm.weight": tensor(HIDDEN),
        "embeddings.LayerNorm.bias": tensor(HIDDEN),
    }
    for index in range(LAYERS):
        p = f"encoder.layer.{index}."
        for name in (
            "attention.self.query",
            "attention.self.key",
            "attention.self.value",
            "attention.output.dense",
        ):
            tensors[p + name + ".weight"] = tensor(HIDDEN, HIDDEN)
            tensors[p + name + ".bias"] = tensor(HIDDEN)
        tensors[p + "intermediate.dense.weight"] = tensor(INNER, HIDDEN)
        tensors[p + "intermediate.dense.bias"] = tensor(INNER)
        tensors[p + "output.dense.weight"] = tensor(HIDDEN, INNER)
        tensors[p + "output.dense.bias"] = tensor(HIDDEN)
        for norm in ("attention.output.LayerNorm", "output.LayerNorm"):
            tensors[p + norm + ".weight"] = tensor(HIDDEN)
            tensors[p + norm + ".bias"] = tensor(HIDDEN)
    save_file(tensors, str(path))
    return path


@pytest.fixture
def model(tmp_path) -> Path:
    return _tiny_bert(tmp_path / "model.safetensors")


def _embed(path: Path, cache: Path | None) -> np.ndarray:
    return bert.forward(bert.load_bert(path, HEADS, 1e-12, cache), IDS, LENGTHS)


def _mappings() -> list[tuple[int, int, str]]:
    """This process's file mappings: (start address, end address, file)."""
    rows = []
    for line in Path("/proc/self/maps").read_text().splitlines():
        fields = line.split(maxsplit=5)
        if len(fields) == 6:
            start, end = (int(value, 16) for value in fields[0].split("-"))
            rows.append((start, end, fields[5]))
    return rows


def _cache_files(cache: Path) -> list[Path]:
    return sorted(cache.glob("bert-*.weights"))


def test_first_load_writes_one_file_and_maps_weights_read_only_with_identical_embeddings(model, tmp_path):
    cache = tmp_path / "cache"
    private = _embed(model, None)
    loaded = bert.load_bert(model, HEADS, 1e-12, cache)
    assert len(_cache_files(cache)) == 1
    assert not list(cache.glob("*.tmp"))
    # Read-only mapped weights: the forward pass writes only into its own activations.
    assert not loaded.word.flags.writeable and not loaded.layers[0].qkv_w.flags.writeable
    # ...and they are views of the file's mapping, not a private copy of it.
    mapped = [(start, end) for start, end, name in _mappings() if name == str(_cache_files(cache)[0])]
    address = loaded.layers[1].up_w.__array_interface__["data"][0]
    assert any(start <= address < end for start, end in mapped)
    assert np.array_equal(bert.forward(loaded, IDS, LENGTHS), private)


def test_a_second_process_maps_the_file_instead_of_laying_out_again(model, tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    expected = _embed(model, cache)

    def refuse(*args):
        raise AssertionError("the weights were laid out again although the cache file is valid")

    monkeypatch.setattr(bert, "lay_out", refuse)
    assert np.array_equal(_embed(model, cache), expected)


def test_a_changed_model_with_the_same_size_and_mtime_gets_its_own_file(model, tmp_path):
    cache = tmp_path / "cache"
    _embed(model, cache)
    stat = model.stat()
    _tiny_bert(model, seed=1)  # same shapes, so the same size; other weights
    os.utime(model, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert model.stat().st_size == stat.st_size
    assert np.array_equal(_embed(model, cache), _embed(model, None))
    assert len(_cache_files(cache)) == 2


@pytest.mark.parametrize("damage", ["truncate", "flip", "header", "shape", "empty"])
def test_a_damaged_cache_file_is_rebuilt_never_used(model, tmp_path, damage):
    cache = tmp_path / "cache"
    expected = _embed(model, cache)
    (path,) = _cache_files(cache)
    data = bytearray(path.read_bytes())
    if damage == "truncate":
        data = data[:-100]
    elif damage == "flip":
        data[-40] ^= 0x10  # one bit of one weight
    elif damage == "header":
        data[20:30] = b"}{not json"
    elif damage == "shape":  # still valid JSON, but the arrays would be read with other shapes
        header = data[16 : 16 + int.from_bytes(data[8:12], "little")]
        changed = header.replace(b"[30, 8]", b"[8, 30]")
        assert changed != header
        data[16 : 16 + len(header)] = changed
    else:
        data = bytearray()
    path.write_bytes(bytes(data))
    assert layout_cache.read(path) is None
    assert np.array_equal(_embed(model, cache), expected)
    assert layout_cache.read(path) is not None  # repaired for the next process


def test_an_unwritable_cache_folder_loads_privately_with_one_warning(model, tmp_path, monkeypatch, caplog):
    monkeypatch.setattr(bert, "_warned", False)
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")  # a folder cannot be made under a file, even by root
    with caplog.at_level(logging.WARNING, logger="ragsite.embedders"):
        first = _embed(model, blocker / "cache")
        second = _embed(model, blocker / "cache")
    assert np.array_equal(first, _embed(model, None)) and np.array_equal(second, first)
    warnings = [r for r in caplog.records if "cache" in r.getMessage()]
    assert len(warnings) == 1
    assert str(tmp_path) not in warnings[0].getMessage()


def test_concurrent_first_loads_agree_and_leave_one_whole_file(model, tmp_path):
    cache = tmp_path / "cache"
    expected = _embed(model, None)
    results, errors = [], []

    def work() -> None:
        try:
            results.append(_embed(model, cache))
        except Exception as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert all(np.array_equal(result, expected) for result in results) and len(results) == 6
    assert len(_cache_files(cache)) == 1 and not list(cache.glob("*.tmp"))


def test_the_file_records_what_it_holds(model, tmp_path):
    cache = tmp_path / "cache"
    _embed(model, cache)
    (path,) = _cache_files(cache)
    raw = path.read_bytes()
    length = int.from_bytes(raw[8:12], "little")
    header = json.loads(raw[16 : 16 + length])
    names = [entry[0] for entry in header["arrays"]]
    assert names[:4] == ["word", "position", "norm_g", "norm_b"] and "1.qkv_w" in names
    assert 16 + length + header["data_bytes"] == len(raw)


def test_concurrent_builds_keep_the_first_file_so_every_process_maps_the_same_one(model, tmp_path):
    cache = tmp_path / "cache"
    arrays = bert.lay_out(model, HEADS)
    path = cache / "bert-x.weights"
    layout_cache.write(path, arrays)
    first = path.stat().st_ino
    layout_cache.write(path, arrays)  # a second process that built at the same time
    assert path.stat().st_ino == first and not list(cache.glob("*.tmp"))
    path.write_bytes(b"broken")
    layout_cache.write(path, arrays)  # but a damaged file is replaced
    assert layout_cache.read(path) is not None


def test_the_cache_folder_setting_reaches_the_local_embedder(settings, tmp_path):
    from ragsite.embedding import get_embedder

    settings.EMBED_CACHE_DIR = str(tmp_path / "shared-weights")
    assert get_embedder("local")._cache_dir == tmp_path / "shared-weights"
    settings.EMBED_CACHE_DIR = ""
    assert get_embedder("local")._cache_dir is None


def test_the_factory_passes_the_cache_folder_to_the_local_backend(tmp_path):
    embedder = build_embedder("local", cache_dir=str(tmp_path / "c"))
    assert embedder._cache_dir == tmp_path / "c"
    assert build_embedder("local")._cache_dir is None


@pytest.mark.model
def test_the_bundled_model_embeds_identically_from_the_shared_file(tmp_path):
    # The 33 reference texts (when the shared test data is there) and a long one past the window.
    texts = ["a short question", "Paris is the capital of France. " * 40, "東京 é 😀"]
    if REFERENCE.is_file():
        texts += [item["text"] for item in json.loads(REFERENCE.read_text(encoding="utf-8"))["items"]]
    private = LocalEmbedder(threads=1).embed(texts)
    writer = LocalEmbedder(threads=1, cache_dir=tmp_path).embed(texts)
    reader = LocalEmbedder(threads=1, cache_dir=tmp_path)
    assert np.array_equal(reader.embed(texts), private) and np.array_equal(writer, private)
    assert not reader._bert.word.flags.writeable
    assert len(_cache_files(tmp_path)) == 1
    assert default_model_dir().joinpath("model.safetensors").is_file()
