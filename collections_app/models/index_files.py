"""Each live build's search index files, stored in the database beside the build record.

The build worker writes a build's index once (services.indexes) and stores its files here, chunked, in
the transaction that makes the build live; a web node that lacks the files (a new machine, a fresh
container, a deleted INDEX_DIR) fetches and verifies them instead of writing them again from the rows
(services.indexes.store). Only the live build's files are kept. Every row carries `agent_id`, as the
paragraphs do, so row-level security scopes them (migration 0020).
"""

from django.db import models

from .collections import Collection


class IndexFile(models.Model):
    """One file of a build's index: where it goes in the build's folder, its size and its SHA-256."""

    collection = models.ForeignKey(
        Collection, on_delete=models.CASCADE, related_name="index_files", db_index=False
    )
    agent_id = models.CharField(max_length=100)
    key = models.CharField(max_length=100)  # services.indexes.build_key: the build's folder name
    path = models.CharField(max_length=200)  # inside the build's folder, "/"-separated ("context/indptr.i64")
    size = models.BigIntegerField()
    sha256 = models.CharField(max_length=64)
    chunks = models.PositiveIntegerField()

    class Meta:
        db_table = "collection_index_file"
        constraints = [
            models.UniqueConstraint(fields=["collection", "key", "path"], name="index_file_unique"),
        ]

    def __str__(self):
        return f"{self.collection_id}/{self.key}/{self.path}"


class IndexChunk(models.Model):
    """A few MiB of one index file (PostgreSQL TOAST and SQLite blobs both take far more, but a chunk
    bounds what one statement moves and holds in memory)."""

    file = models.ForeignKey(IndexFile, on_delete=models.CASCADE, related_name="+", db_index=False)
    agent_id = models.CharField(max_length=100)
    number = models.PositiveIntegerField()
    data = models.BinaryField()

    class Meta:
        db_table = "collection_index_chunk"
        constraints = [models.UniqueConstraint(fields=["file", "number"], name="index_chunk_unique")]

    def __str__(self):
        return f"{self.file_id} #{self.number}"
