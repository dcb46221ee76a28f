"""Tables the background demo tools read and write."""

from __future__ import annotations

from django.db import models


class ReportRun(models.Model):
    """One report a background call generated (written once per call, inside ``ctx.once``)."""

    call_id = models.CharField(max_length=64, unique=True)
    rows = models.PositiveIntegerField()
    total = models.BigIntegerField(null=True, blank=True, help_text="Set when the report is complete.")
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"report of {self.rows} rows"


class Event(models.Model):
    """An operations event; ``list_events`` pages through them with resume tokens."""

    kind = models.CharField(max_length=32)
    message = models.CharField(max_length=255)
    created_at = models.DateTimeField(db_index=True)

    class Meta:
        ordering = ["created_at", "id"]

    def __str__(self) -> str:
        return f"{self.kind}: {self.message}"


class Rollout(models.Model):
    """A deployment that converges: ``wait_for_rollout`` says "still converging" until ``ready_at``."""

    deployment = models.CharField(max_length=64, unique=True)
    started_at = models.DateTimeField(auto_now_add=True)
    ready_at = models.DateTimeField()

    def __str__(self) -> str:
        return self.deployment
