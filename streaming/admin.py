"""The log in the admin: read-only, newest first, filterable by what operators ask about."""

from __future__ import annotations

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import HttpResponse
from django.template.response import TemplateResponse
from django.urls import path
from django.utils import timezone
from django.utils.html import format_html_join
from django.utils.safestring import mark_safe

from streaming import admin_audit, admin_conversations, admin_usage  # noqa: F401 - they register
from streaming.generations import record
from streaming.http import audit
from streaming.http.sign_in import AdminSignInForm
from streaming.models import (
    ApiKey,
    GenerationLog,
    StoredResponse,
)
from streaming.ops import dashboard, log_pages, models_page

# The admin index gains a link to the latency dashboard: the index template is the only place
# Django lets an app add to that page (the app list shows models only).
admin.site.index_template = "admin/streaming/index.html"
# Its sign-in is throttled as the chat's is (docs/security.md, "Signing in"); chatsite/urls.py
# answers a refused attempt with 429.
admin.site.login_form = AdminSignInForm


@admin.register(GenerationLog)
class GenerationLogAdmin(admin.ModelAdmin):
    """The log's list leads with what people look for (when, how it ended, how fast, whose),
    narrow enough for a laptop's screen; each row's page shows every column."""

    list_display = ("when", "ending", "model", "ttft", "tpot", "gap_p99", "tokens", "owner")
    # Nothing here reads the whole log: the filters' choices are fixed or the rollup's, the
    # search matches whole ids (indexed), and the count is the rollup's or stops at a cap.
    list_filter = (
        "status",
        log_pages.ModelFilter,
        log_pages.ApiFilter,
        ("created_at", admin.DateFieldListFilter),
    )
    search_fields = ("=generation_id", "=owner")
    search_help_text = "A generation's id, or an owner (user:3, key:7, anon:…, ip:…), whole."
    paginator = log_pages.LogPaginator
    show_full_result_count = False
    ordering = ("-created_at",)
    fieldsets = (
        (
            None,
            {
                "fields": (
                    "generation_id",
                    "created_at",
                    "day",
                    "finished_at",
                    "status",
                    "error_code",
                )
            },
        ),
        ("Who asked", {"fields": ("owner", "client", "api")}),
        ("What made it", {"fields": ("engine", "model", "made_by")}),
        ("Counters and latencies", {"fields": (*record.FIGURES, *record.ENGINE_COUNTS)}),
        ("What was asked", {"fields": ("max_tokens", "prompt_chars", "message_count", "prompt")}),
        ("Tool calls", {"fields": ("tool_calls",)}),
    )
    readonly_fields = ("made_by", "day")

    def changelist_view(self, request, extra_context=None):
        """The list without the admin's side bar of models: the table needs the width."""
        return super().changelist_view(
            request, {"is_nav_sidebar_enabled": False, **(extra_context or {})}
        )

    def get_urls(self):
        """The changelist's URLs plus its pages, behind the admin's staff login: `dashboard/`
        (TTFT and TPOT percentiles over time and by model, histograms, how streams ended),
        `models/` (ops/models_page.py) and `usage/` (tokens per person: admin_usage.py)."""
        prefix = f"{self.opts.app_label}_{self.opts.model_name}"
        pages = {
            "dashboard": ("Latency dashboard", dashboard.context),
            "models": ("Models", lambda request: models_page.context()),
            "usage": ("Usage", admin_usage.page),
        }
        view = self.admin_site.admin_view
        urls = [
            path(f"{name}/", view(self._page(name, *page)), name=f"{prefix}_{name}")
            for name, page in pages.items()
        ]
        return [*urls, *super().get_urls()]

    def _page(self, name, title, context):
        """One page's view: its template generationlog/<name>.html, or its own response (a CSV)."""

        def view(request):
            if not self.has_view_permission(request):
                raise PermissionDenied
            shown = context(request)
            if isinstance(shown, HttpResponse):
                return shown
            return TemplateResponse(
                request,
                f"admin/streaming/generationlog/{name}.html",
                {
                    **self.admin_site.each_context(request),
                    "opts": self.opts,
                    "title": title,
                    **shown,
                },
            )

        return view

    @admin.display(description="when", ordering="created_at")
    def when(self, row):
        """When it was asked, to the second, in the site's time zone."""
        return timezone.localtime(row.created_at).strftime("%Y-%m-%d %H:%M:%S")

    @admin.display(description="status", ordering="status")
    def ending(self, row):
        """How it ended, and its error code where the status does not say it already."""
        status = row.get_status_display()
        code = row.error_code
        return f"{status}: {code}" if code and code != row.status else status

    @admin.display(description="TTFT (ms)", ordering="ttft_ms")
    def ttft(self, row):
        """Time to first token."""
        return log_pages.ms(row.ttft_ms)

    @admin.display(description="TPOT (ms)", ordering="tpot_ms")
    def tpot(self, row):
        """Time per output token after the first."""
        return log_pages.ms(row.tpot_ms)

    @admin.display(description="gap p99 (ms)", ordering="itl_p99_ms")
    def gap_p99(self, row):
        """The 99th percentile of the gaps between tokens: the stalls a reader sees."""
        return log_pages.ms(row.itl_p99_ms)

    @admin.display(description="tokens", ordering="tokens_generated")
    def tokens(self, row):
        """Tokens generated."""
        return row.tokens_generated

    @admin.display(description="made by")
    def made_by(self, row):
        """Each model worker that made part of it and how many tokens (a fleet's; after a
        handover, more than one)."""
        made = ((w["worker"], w["tokens"]) for w in row.workers)
        return format_html_join(mark_safe("<br>"), "{}: {} tokens", made) or "-"

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
            was_revoked = ApiKey.objects.filter(pk=obj.pk, revoked_at__isnull=False).exists()
            super().save_model(request, obj, form, change)
            if obj.revoked_at is not None and not was_revoked:
                audit.record(request, audit.KEY_REVOKED, target=str(obj))
            return
        row, key = ApiKey.issue(obj.name, obj.user)
        audit.record(request, audit.KEY_CREATED, target=str(row), detail=_acts_as(row))
        obj.pk, obj.prefix, obj.digest = row.pk, row.prefix, row.digest
        obj.created_at = row.created_at
        obj._state.adding = False
        self.message_user(request, f"The key, shown this once: {key}", messages.WARNING)

    @admin.action(description="Revoke the selected keys")
    def revoke(self, request, queryset):
        """Refuse them from now on (the rows stay, for the record)."""
        revoking = list(queryset.filter(revoked_at=None))
        queryset.filter(pk__in=[key.pk for key in revoking]).update(revoked_at=timezone.now())
        for key in revoking:
            audit.record(request, audit.KEY_REVOKED, target=str(key))
        self.message_user(request, f"{len(revoking)} key(s) revoked.")

    def delete_model(self, request, obj):
        """A key deleted is revoked for good: audited as such."""
        target = str(obj)
        super().delete_model(request, obj)
        audit.record(request, audit.KEY_REVOKED, target=target, detail="deleted")

    def delete_queryset(self, request, queryset):
        """Several deleted at once: one row each."""
        targets = [str(key) for key in queryset]
        super().delete_queryset(request, queryset)
        for target in targets:
            audit.record(request, audit.KEY_REVOKED, target=target, detail="deleted")


def _acts_as(key: ApiKey) -> str:
    """Whom a new key acts as, for its audit row."""
    return f"acts as {key.user}" if key.user_id else "acts as itself"
