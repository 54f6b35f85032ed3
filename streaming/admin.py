"""The log in the admin: read-only, newest first, filterable by what operators ask about."""

from __future__ import annotations

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.template.response import TemplateResponse
from django.urls import path

from . import dashboard
from .models import GenerationLog

# The admin index gains a link to the latency dashboard: the index template is the only place
# Django lets an app add to that page (the app list shows models only).
admin.site.index_template = "admin/streaming/index.html"


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

    def get_urls(self):
        """The changelist's URLs plus `dashboard/`, behind the admin's staff login."""
        view = self.admin_site.admin_view(self.dashboard_view)
        name = f"{self.opts.app_label}_{self.opts.model_name}_dashboard"
        return [path("dashboard/", view, name=name), *super().get_urls()]

    def dashboard_view(self, request):
        """p50/p90/p99 of TTFT and TPOT over time and by model, histograms, how streams ended."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        return TemplateResponse(request, "admin/streaming/generationlog/dashboard.html", {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": "Latency dashboard",
            **dashboard.context(request),
        })

    def has_add_permission(self, request):
        """Rows come from generations only."""
        return False

    def has_change_permission(self, request, obj=None):
        """The log is a record: nobody edits it."""
        return False

    def has_delete_permission(self, request, obj=None):
        """Pruning is `manage.py prune_logs`' job, by age, not a click on one row."""
        return False
