"""Which database a model tool's write goes to, with ``DATABASE_ROUTERS``.

Django routes each query of a model (``router.db_for_read`` / ``db_for_write``), but
``transaction.atomic()`` with no alias opens its transaction on ``default``: on a site whose
model lives on another database the write ran outside it, committed at once, and a failure
after it (a result that cannot be built, an admin action that needs a page) no longer rolled
it back. A model tool's transaction is opened where its write goes, and the row a write
changes is read there too: a replica that lags would hand back an older row, which ``save()``
then writes over the newer one, and a confirmation would be checked against it.
"""

from __future__ import annotations

from typing import Any

from django.db import models, router


def write_alias(model: type[models.Model], instance: models.Model | None = None) -> str:
    """The alias ``model``'s writes go to (of ``instance``, where it was read: Django's fallback
    for a router that does not say), as ``save()``, ``delete()`` and ``QuerySet.update()`` pick it."""
    if instance is not None:
        return router.db_for_write(model, instance=instance)
    return router.db_for_write(model)


def for_writing(queryset: models.QuerySet[Any]) -> models.QuerySet[Any]:
    """``queryset`` read from the alias its rows are written to, unless it names one (``using()``)."""
    if getattr(queryset, "_db", None) is not None:
        return queryset
    return queryset.using(write_alias(queryset.model))


def current_row(queryset: models.QuerySet[Any], obj: models.Model) -> Any:
    """``obj`` read again through ``queryset`` in the transaction about to change it, its row locked
    until that transaction ends: None if it is gone, or no longer in ``queryset``.

    What a confirmed change acts on. The user answered about the row as it was when asked, maybe
    minutes ago (a 2025-11-25 session waits for the answer): the change must see the row as it is
    now, and nothing may change it between this look and the write. The lock is taken by primary
    key alone (``SELECT ... FOR UPDATE`` of a ``queryset`` with outer joins or ``DISTINCT`` is an
    error on PostgreSQL); databases without row locks (SQLite) take their write lock as the
    transaction begins.
    """
    model = type(obj)
    alias = write_alias(model, obj)
    model._base_manager.db_manager(alias).select_for_update().filter(pk=obj.pk).exists()
    return for_writing(queryset).filter(pk=obj.pk).first()
