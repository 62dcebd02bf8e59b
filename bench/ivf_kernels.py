"""Vector kernels over the same rows and the same IVF lists, interleaved in one process (issue 29 item 1).

    python bench/ivf_build.py --kernels [--data clustered|scifact ...]

Arms, each returning its top 10 for a question (recall@10 against the exact scan):
* ragsite gather: the lists' rows gathered from the vectors (the kernel before issue 29);
* ragsite ordered: each probed list one contiguous block of the vectors written again in list order
  (`IVFLists.scan` over `ordered`, what the index maps now);
* faiss IVFFlat over ragsite's centroids and lists, read whole ("in memory") and with IO_FLAG_MMAP;
* faiss HNSW (M 32, efConstruction 40) at efSearch 64, 128, 256.
Each arm's private dirty memory (what a gunicorn worker could not share) is read from
/proc/self/smaps_rollup before and after loading it: a mapped file adds none.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from ragsite.top import top_rows

K = 10


def private_dirty() -> int:
    """This process's private dirty bytes (anonymous memory it wrote, plus written private file pages)."""
    for line in Path("/proc/self/smaps_rollup").read_text().splitlines():
        if line.startswith("Private_Dirty:"):
            return int(line.split()[1]) * 1024
    return 0


def write_faiss_ivf(vectors: np.ndarray, lists, path: Path) -> None:
    """faiss's IVFFlat over ragsite's own centroids, each vector in ragsite's list for it (`add_core`
    with the build's assignment), so both probe the same lists; written to ``path``."""
    import faiss

    d = vectors.shape[1]
    quantizer = faiss.IndexFlatIP(d)
    quantizer.add(np.ascontiguousarray(lists.centroids, dtype=np.float32))
    ivf = faiss.IndexIVFFlat(quantizer, d, lists.nlist, faiss.METRIC_INNER_PRODUCT)
    ivf.is_trained = True
    assignment = np.empty(lists.members.shape[0], dtype=np.int64)
    assignment[np.asarray(lists.members)] = np.repeat(np.arange(lists.nlist), np.diff(lists.offsets))
    x = np.ascontiguousarray(vectors, dtype=np.float32)
    ivf.add_core(x.shape[0], faiss.swig_ptr(x), None, faiss.swig_ptr(assignment))
    faiss.write_index(ivf, str(path))


def arms_for(vectors: np.ndarray, lists) -> tuple[dict, dict]:
    import faiss

    faiss.omp_set_num_threads(1)
    memory = {}
    d = vectors.shape[1]
    ordered = replace(lists, ordered=np.ascontiguousarray(vectors[np.asarray(lists.members)]))

    def gather(ids, q):
        return vectors[ids] @ q

    def ours(kernel):
        def run(q):
            ids, products = kernel.scan(q, None, gather)
            return ids[top_rows(products, None, K)]

        return run

    arms = {"ragsite gather": ours(replace(lists, ordered=None)), "ragsite ordered": ours(ordered)}
    folder = Path(tempfile.mkdtemp(prefix="ivf-kernels-"))
    x = np.ascontiguousarray(vectors, dtype=np.float32)
    write_faiss_ivf(x, lists, folder / "ivf.index")
    params = faiss.SearchParametersIVF(nprobe=lists.nprobe)
    for name, flags in (("faiss IVFFlat in memory", 0), ("faiss IVFFlat mapped", faiss.IO_FLAG_MMAP)):
        before = private_dirty()
        index = faiss.read_index(str(folder / "ivf.index"), flags)
        memory[name] = private_dirty() - before
        arms[name] = lambda q, index=index: index.search(q[None], K, params=params)[1][0]
    started = time.perf_counter()
    before = private_dirty()
    hnsw = faiss.IndexHNSWFlat(d, 32, faiss.METRIC_INNER_PRODUCT)
    hnsw.hnsw.efConstruction = 40
    hnsw.add(x)
    memory["faiss HNSW"] = private_dirty() - before
    memory["faiss HNSW build s"] = time.perf_counter() - started
    for ef in (64, 128, 256):
        search = faiss.SearchParametersHNSW(efSearch=ef)
        arms[f"faiss HNSW ef {ef}"] = lambda q, search=search: hnsw.search(q[None], K, params=search)[1][0]
    return arms, memory


def compare(vectors: np.ndarray, questions: np.ndarray, lists, rounds: int = 3) -> None:
    arms, memory = arms_for(vectors, lists)
    truth = [set(top_rows(vectors @ q, None, K).tolist()) for q in questions]
    times = {name: [] for name in arms}
    found = {name: 0 for name in arms}
    order = np.random.default_rng(1)
    for _ in range(rounds):
        for q, exact in zip(questions, truth, strict=True):
            for name in order.permutation(list(arms)):
                started = time.perf_counter()
                top = arms[name](q)
                times[name].append(time.perf_counter() - started)
                found[name] += len(exact & {int(r) for r in top})
    base = statistics.median(times["ragsite gather"])
    print(f"\nnprobe {lists.nprobe} of {lists.nlist}; {rounds} interleaved rounds: p50, ratio, recall@10")
    for name in arms:
        mib = f", private dirty +{memory[name] / 2**20:.0f} MiB" if name in memory else ""
        p50 = statistics.median(times[name])
        recall = found[name] / (K * rounds * len(questions))
        print(f"{name:24s} {1000 * p50:7.3f} ms  {p50 / base:5.2f}x  recall@10 {recall:.3f}{mib}")
    hnsw = memory["faiss HNSW"]
    print(f"faiss HNSW: built in {memory['faiss HNSW build s']:.1f} s, private dirty +{hnsw / 2**20:.0f} MiB")
