"""Run one real build of a folder in a fresh process and print its peak memory, for the bound tests.

    python -m tests.worker_peak FOLDER STORE.sqlite3 [METHOD]

The process migrates a scratch SQLite store, builds a collection from FOLDER with the model-free
``hash`` embedder (the embedder's own memory is not what is bounded here), and prints one JSON line:
the build's status, documents read and refused, and the peak resident memory (``ru_maxrss``) before
the build and after it, in MiB, and the largest peak of its children (the extraction child, a
process of its own capped by ``EXTRACT_MEMORY_MB``).
"""

from __future__ import annotations

import json
import os
import resource
import sys


def main(folder: str, store: str, method: str = "structure") -> None:
    os.environ.update({"DATABASE_URL": f"sqlite:///{store}", "EMBED_BACKEND": "hash", "LOG_LEVEL": "ERROR",
                       "DJANGO_SETTINGS_MODULE": "ragsite.settings", "KNOWLEDGE_PEAK__PEAK_FOLDER": folder})
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from collections_app.services.agents import create_agent, create_collection
    from collections_app.services.builds import build_collection

    agent = create_agent(agent_id="peak")[0]
    collection = create_collection(agent=agent, name="peak", method=method, built_from="the peak probe")
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    run = build_collection(collection=collection, requested_by="probe")
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    from collections_app.services.sources import document_extractor

    document_extractor().close()  # the extraction child is waited for, so its peak is counted below
    child = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024
    print(json.dumps({"status": run.status, "read": run.documents_read, "refused": run.documents_refused,
                      "warnings": run.warnings, "before_mib": before, "peak_mib": after,
                      "child_peak_mib": child}))


if __name__ == "__main__":
    main(*sys.argv[1:4])
