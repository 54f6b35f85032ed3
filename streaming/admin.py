"""The log in the admin: read-only, newest first, filterable by what operators ask about."""

from __future__ import annotations

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.template.response import TemplateResponse
from django.urls import path
from django.utils import timezone

from streaming.models import ApiKey, GenerationLog, StoredResponse
from streaming.ops import dashboard

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
    search_fields = ("generation_id", "client", "owner", "model", "error_code")
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


@admin.register(StoredResponse)
class StoredResponseAdmin(admin.ModelAdmin):
    """The Responses API's stored responses: read-only (`DELETE /v1/responses/<id>` forgets)."""

    list_display = ("response_id", "created_at", "status", "owner", "output_tokens")
    list_filter = ("status",)
    search_fields = ("response_id", "owner")
    date_hierarchy = "created_at"

    def has_add_permission(self, request):
        """Responses are made by the API."""
        return False

    def has_change_permission(self, request, obj=None):
        """A record of what was asked and answered."""
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
