"""Run one real build of a folder in a fresh process and print its peak memory, for the bound tests.

    python -m tests.worker_peak FOLDER STORE.sqlite3 [METHOD]

The process migrates a scratch SQLite store, builds a collection from FOLDER with the model-free
``hash`` embedder (the embedder's own memory is not what is bounded here), and prints one JSON line:
the build's status, documents read and refused, this process's resident memory before the build and
its peak during it (``VmHWM``, reset before the build), in MiB, and the largest peak of its children
(the extraction child, a process of its own capped by ``EXTRACT_MEMORY_MB``; an upper bound, since
Linux starts a child's ``ru_maxrss`` from its parent's).
"""

from __future__ import annotations

import json
import os
import resource
import sys
from pathlib import Path


def _status_mib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) // 1024
    raise LookupError(field)


def main(folder: str, store: str, method: str = "structure") -> None:
    os.environ.update(
        {
            "DATABASE_URL": f"sqlite:///{store}",
            "EMBED_BACKEND": "hash",
            "LOG_LEVEL": "ERROR",
            "DJANGO_SETTINGS_MODULE": "config.settings",
            "KNOWLEDGE_PEAK__PEAK_FOLDER": folder,
        }
    )
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from collections_app.services.agents import create_agent, create_collection
    from collections_app.services.builds import build_collection

    agent = create_agent(agent_id="peak")[0]
    collection = create_collection(agent=agent, name="peak", method=method, built_from="the peak probe")
    # Not ru_maxrss: Linux carries it over exec from the process that started this one (pytest, often
    # larger than any build here), so the growth it shows could be nil whatever the build did.
    # VmHWM is this process's own, reset here so that its peak is the build's.
    Path("/proc/self/clear_refs").write_text("5")
    before = _status_mib("VmRSS")
    run = build_collection(collection=collection, requested_by="probe")
    after = _status_mib("VmHWM")
    from collections_app.services.sources import document_extractor

    document_extractor().close()  # the extraction child is waited for, so its peak is counted below
    child = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024
    print(
        json.dumps(
            {
                "status": run.status,
                "read": run.documents_read,
                "refused": run.documents_refused,
                "warnings": run.warnings,
                "before_mib": before,
                "peak_mib": after,
                "child_peak_mib": child,
            }
        )
    )


if __name__ == "__main__":
    main(*sys.argv[1:4])
