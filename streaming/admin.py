"""The log in the admin: read-only, newest first, filterable by what operators ask about."""

from __future__ import annotations

from django.contrib import admin, messages
from django.utils import timezone

from .models import ApiKey, GenerationLog


@admin.register(GenerationLog)
class GenerationLogAdmin(admin.ModelAdmin):
    list_display = (
        "created_at", "status", "engine", "model", "client", "prompt_chars", "tokens_generated",
        "tokens_after_abort", "ttft_ms", "tpot_ms", "itl_p50_ms", "itl_p99_ms", "itl_max_ms",
        "total_ms", "error_code",
    )
    list_filter = ("status", "engine", "api", ("created_at", admin.DateFieldListFilter))
    search_fields = ("generation_id", "client", "owner", "model", "error_code")
    date_hierarchy = "created_at"
    ordering = ("-created_at",)

    def has_add_permission(self, request):
        """Rows come from generations only."""
        return False

    def has_change_permission(self, request, obj=None):
        """The log is a record: nobody edits it."""
        return False

    def has_delete_permission(self, request, obj=None):
        """Pruning is `manage.py prune_logs`' job, by age, not a click on one row."""
        return False


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):
    """Keys by name and prefix; adding one shows the key once, revoking is an action."""

    list_display = ("name", "prefix", "user", "created_at", "last_used_at", "revoked_at")
    list_filter = (("revoked_at", admin.EmptyFieldListFilter),)
    search_fields = ("name", "prefix", "user__username")
    fields = ("name", "user", "revoked_at")
    actions = ("revoke",)

    def save_model(self, request, obj, form, change):
        """A new row gets a fresh key, shown in the confirmation message and nowhere after."""
        if change:
            return super().save_model(request, obj, form, change)
        row, key = ApiKey.issue(obj.name, obj.user)
        obj.pk, obj.prefix, obj.digest = row.pk, row.prefix, row.digest
        obj.created_at = row.created_at
        obj._state.adding = False
        self.message_user(request, f"The key, shown this once: {key}", messages.WARNING)

    @admin.action(description="Revoke the selected keys")
    def revoke(self, request, queryset):
        """Refuse them from now on (the rows stay, for the record)."""
        count = queryset.filter(revoked_at=None).update(revoked_at=timezone.now())
        self.message_user(request, f"{count} key(s) revoked.")
