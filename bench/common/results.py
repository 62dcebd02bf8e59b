"""Where a suite's figures go: ``bench/results/<name>.json``, with the code and the load they come from."""

from __future__ import annotations

import json
import os
import subprocess
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "bench" / "results"


def provenance() -> dict:
    """Which code a figure comes from (commit, and whether the worktree differed from it) and when."""

    def git(*args: str) -> str:
        out = subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=False)
        return out.stdout

    # Code only: the suites redraw docs/img/ and write bench/results/, neither of them code.
    changed = [
        line[3:]
        for line in git(
            "status", "--porcelain", "--untracked-files=no", "--", ".", ":!docs", ":!bench/results"
        ).splitlines()
        if line
    ]
    return {
        "commit": git("rev-parse", "--short=10", "HEAD").strip() or "unknown",
        "changed": changed,
        "at": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "load": list(os.getloadavg()),
    }


def save(name: str, figures: dict, path: Path | None = None) -> Path:
    """Write ``figures`` with their provenance to ``path`` (default ``bench/results/<name>.json``)."""
    path = path or RESULTS / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"provenance": provenance(), **figures}, indent=1, ensure_ascii=False) + "\n")
    return path
