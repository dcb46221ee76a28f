"""Demo data for operations: a few dozen events, so ``list_events`` has pages to page through."""

from __future__ import annotations

from datetime import timedelta

from django.db import transaction
from django.utils import timezone

KINDS = ("deploy", "restock", "alert", "backup")
#: How many events the demo keeps: several pages at ``list_events(page_size=10)``.
EVENT_COUNT = 36


def seed_events() -> int:
    """Create the demo's events when there are none (safe to run again); returns how many were created."""
    from .models import Event

    with transaction.atomic():
        if Event.objects.exists():
            return 0
        start = timezone.now() - timedelta(hours=EVENT_COUNT)
        Event.objects.bulk_create(
            Event(kind=KINDS[n % len(KINDS)], message=f"{KINDS[n % len(KINDS)]} #{n + 1}", created_at=start + timedelta(hours=n))
            for n in range(EVENT_COUNT)
        )
    return EVENT_COUNT
