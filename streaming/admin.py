"""The log in the admin: read-only, newest first, filterable by what operators ask about."""

from __future__ import annotations

from django.contrib import admin

from .models import GenerationLog


@admin.register(GenerationLog)
class GenerationLogAdmin(admin.ModelAdmin):
    list_display = (
        "created_at", "status", "engine", "model", "client", "prompt_chars", "tokens_generated",
        "tokens_after_abort", "ttft_ms", "tpot_ms", "itl_p50_ms", "itl_p99_ms", "itl_max_ms",
        "total_ms", "error_code",
    )
    list_filter = ("status", "engine", "api", ("created_at", admin.DateFieldListFilter))
    search_fields = ("generation_id", "client", "model", "error_code")
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
