"""Where a collection's documents come from when it is not a folder on this machine (docs/sources.md)."""

from django.db import models
from django.utils import timezone

from ..fields import SealedSecretField

COLLECTION = "collections_app.Collection"


class CollectionSource(models.Model):
    """A collection's origin: a folder (the default, also when a collection has no row), an S3-compatible
    bucket, a WebDAV share, a git repository or a website.

    `settings` holds what is not secret (an endpoint, a bucket, a branch, a path), checked per kind by
    `services.origins.checked_settings`; `credentials` holds the secret part as JSON, sealed at rest with
    the keys that seal webhook secrets (collections_app.sealed), and is never shown after it is set.
    """

    FOLDER, S3, WEBDAV, GIT, WEB = "folder", "s3", "webdav", "git", "web"
    KINDS = (FOLDER, S3, WEBDAV, GIT, WEB)

    collection = models.OneToOneField(COLLECTION, on_delete=models.CASCADE, related_name="origin")
    kind = models.CharField(max_length=10, choices=[(k, k) for k in KINDS], default=FOLDER)
    settings = models.JSONField(default=dict, blank=True)
    credentials = SealedSecretField(max_length=4000, blank=True, default="", editable=False)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        verbose_name = "collection source"

    def __str__(self):
        return f"{self.kind} source of {self.collection}"


class SourceLabel(models.Model):
    """A paragraph's label that its document's source gave (docs/sources.md, "Permissions"): the link itself
    is in Paragraph.labels, where searches read it; this row says the source made it, so a build that sees
    the source stop giving the label takes it away again, and never a label a person set."""

    # No index of its own: the unique (paragraph, label) index is led by it and serves its look-ups.
    paragraph = models.ForeignKey(
        "collections_app.Paragraph", on_delete=models.CASCADE, related_name="+", db_index=False
    )
    label = models.ForeignKey("collections_app.Label", on_delete=models.CASCADE, related_name="+")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["paragraph", "label"], name="source_label_unique"),
        ]

    def __str__(self):
        return f"label {self.label_id} on paragraph {self.paragraph_id}, from its source"
