"""An object-permission backend for the shop: what ``user.has_perm(perm, obj)`` answers for shop rows.

Django's ``ModelBackend`` answers every object-level question with no; this
backend answers them for ``shop`` permissions like django-rules would: a user
holds a permission on a row when they hold it on the model, except that a
refund needs the order to belong to the user's own store.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.backends import BaseBackend


class StoreRulesBackend(BaseBackend):
    def has_perm(self, user_obj: Any, perm: str, obj: Any = None) -> bool:
        if obj is None or not perm.startswith("shop.") or not getattr(user_obj, "is_active", False):
            return False  # model-level questions are the ModelBackend's
        if not user_obj.has_perm(perm):
            return False
        from .models import Order, StaffMember

        if perm == "shop.add_refund" and isinstance(obj, Order):
            staff = StaffMember.objects.filter(user=user_obj).first()
            return staff is not None and staff.store == obj.store
        return True
