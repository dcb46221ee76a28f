from django.contrib import admin

from .models import AuditLog, Product


@admin.register(Product)
class ProductAdmin(admin.ModelAdmin):
    list_display = ("sku", "name", "price", "stock")
    search_fields = ("sku", "name")
    list_editable = ("price", "stock")


@admin.register(AuditLog)
class AuditLogAdmin(admin.ModelAdmin):
    list_display = ("created_at", "actor", "action")
    list_filter = ("action",)
    search_fields = ("actor", "action")
    readonly_fields = ("created_at", "actor", "action", "detail")

    def has_add_permission(self, request) -> bool:
        return False
