"""The log in the admin: read-only, newest first, filterable by what operators ask about."""

from __future__ import annotations

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import Count, OuterRef, Q, Subquery
from django.http import HttpResponse
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.http import urlencode
from django.utils.safestring import mark_safe

from streaming import admin_usage
from streaming.conversations import search, sharing
from streaming.generations import record
from streaming.http.sign_in import AdminSignInForm
from streaming.models import (
    ANSWER_SETTINGS,
    ApiKey,
    Conversation,
    ConversationItem,
    Feedback,
    GenerationLog,
    SharedLink,
    StoredResponse,
)
from streaming.ops import dashboard, models_page

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
    list_filter = ("status", "engine", "api", ("created_at", admin.DateFieldListFilter))
    search_fields = ("generation_id", "client", "owner", "model", "error_code")
    date_hierarchy = "created_at"
    ordering = ("-created_at",)
    fieldsets = (
        (None, {"fields": ("generation_id", "created_at", "finished_at", "status", "error_code")}),
        ("Who asked", {"fields": ("owner", "client", "api")}),
        ("What made it", {"fields": ("engine", "model", "made_by")}),
        ("Counters and latencies", {"fields": (*record.FIGURES, *record.ENGINE_COUNTS)}),
        ("What was asked", {"fields": ("max_tokens", "prompt_chars", "message_count", "prompt")}),
    )
    readonly_fields = ("made_by",)

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
        return _ms(row.ttft_ms)

    @admin.display(description="TPOT (ms)", ordering="tpot_ms")
    def tpot(self, row):
        """Time per output token after the first."""
        return _ms(row.tpot_ms)

    @admin.display(description="gap p99 (ms)", ordering="itl_p99_ms")
    def gap_p99(self, row):
        """The 99th percentile of the gaps between tokens: the stalls a reader sees."""
        return _ms(row.itl_p99_ms)

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


class OwnerFilter(admin.SimpleListFilter):
    """By kind of owner, or (`?owner=<owner>`, the link in each row) one owner."""

    title = "owner"
    parameter_name = "owner"
    KINDS = (
        ("user:", "signed-in users"),
        ("key:", "API keys"),
        ("anon:", "anonymous browsers"),
        ("ip:", "anonymous addresses"),
    )

    def lookups(self, request, model_admin):
        """The kinds, and the owner chosen if it is one."""
        chosen = self.value()
        kinds = list(self.KINDS)
        return kinds if chosen is None or chosen in dict(kinds) else [*kinds, (chosen, chosen)]

    def queryset(self, request, queryset):
        """A kind's conversations, or one owner's."""
        chosen = self.value()
        if chosen is None:
            return queryset
        if chosen in dict(self.KINDS):
            return queryset.filter(owner__startswith=chosen)
        return queryset.filter(owner=chosen)


class WhatWasSaid:
    """A conversation and its items, read-only here: the APIs make them, and deleting is their
    owner's, through the APIs (which also stop the answers)."""

    def has_add_permission(self, request, obj=None):
        """Made by the APIs only."""
        return False

    def has_change_permission(self, request, obj=None):
        """A record of what was said."""
        return False

    def has_delete_permission(self, request, obj=None):
        """The owner's, through the APIs."""
        return False


class ConversationItemInline(WhatWasSaid, admin.TabularInline):
    """A conversation's items, every branch, in order; an answer with its latencies from its
    log row (one query for them all: annotated, not looked up per row)."""

    model = ConversationItem
    fk_name = "conversation"
    fields = (
        "item_id",
        "depth",
        "role",
        "content",
        "status",
        "finish_reason",
        "generation_id",
        "ttft",
        "tpot",
    )
    readonly_fields = fields
    ordering = ("depth", "pk")
    extra = 0
    can_delete = False
    show_change_link = False

    def get_queryset(self, request):
        """Each item with its generation's TTFT and TPOT, if it has a log row."""
        logged = GenerationLog.objects.filter(generation_id=OuterRef("generation_id"))
        return (
            super()
            .get_queryset(request)
            .annotate(
                ttft=Subquery(logged.values("ttft_ms")[:1]),
                tpot=Subquery(logged.values("tpot_ms")[:1]),
            )
        )

    @admin.display(description="TTFT (ms)")
    def ttft(self, item):
        """Its answer's time to first token."""
        return _ms(getattr(item, "ttft", None))

    @admin.display(description="TPOT (ms)")
    def tpot(self, item):
        """Its answer's time per output token."""
        return _ms(getattr(item, "tpot", None))


@admin.register(Conversation)
class ConversationAdmin(WhatWasSaid, admin.ModelAdmin):
    """People's conversations, read-only: by owner, searched by title and text (the search
    index, as the page's `?q=`), each with its items and their answers' latencies."""

    list_display = (
        "conversation_id",
        "title",
        "owner_link",
        "item_count",
        "updated_at",
        "created_at",
    )
    list_filter = (OwnerFilter, ("updated_at", admin.DateFieldListFilter))
    search_fields = ("conversation_id", "owner")
    search_help_text = "An id, an owner, or words of a title or of the text."
    date_hierarchy = "updated_at"
    ordering = ("-updated_at",)
    fields = (
        "conversation_id",
        "owner",
        "title",
        "created_at",
        "updated_at",
        "metadata",
        *ANSWER_SETTINGS,
        "current",
    )
    readonly_fields = fields
    inlines = (ConversationItemInline,)

    def get_queryset(self, request):
        """With each conversation's item count (one query for the page)."""
        return super().get_queryset(request).annotate(items_counted=Count("items"))

    def get_search_results(self, request, queryset, search_term):
        """An exact id or owner, or the words in a title or the text (search.matching)."""
        term = search_term.strip()
        if not term:
            return queryset, False
        return queryset.filter(
            Q(conversation_id=term) | Q(owner=term) | search.matching(term)
        ), False

    @admin.display(description="owner", ordering="owner")
    def owner_link(self, conversation):
        """The owner, linking to their conversations."""
        query = urlencode({OwnerFilter.parameter_name: conversation.owner})
        return format_html('<a href="?{}">{}</a>', query, conversation.owner)

    @admin.display(description="items", ordering="items_counted")
    def item_count(self, conversation):
        """Items, every branch counted."""
        return conversation.items_counted


@admin.register(SharedLink)
class SharedLinkAdmin(WhatWasSaid, admin.ModelAdmin):
    """People's shared links (docs/conversations.md, "Sharing"): whose, to which conversation,
    when made and revoked; revoking is an action (its page is a 404 from then on)."""

    list_display = ("title", "owner", "conversation", "chars", "created_at", "revoked_at")
    list_filter = (OwnerFilter, ("revoked_at", admin.EmptyFieldListFilter))
    search_fields = ("owner", "title", "conversation__conversation_id")
    list_select_related = ("conversation",)
    ordering = ("-created_at",)
    fields = ("title", "owner", "conversation", "chars", "created_at", "revoked_at")
    readonly_fields = fields
    actions = ("revoke",)

    @admin.action(description="Revoke the selected links")
    def revoke(self, request, queryset):
        """End them: their pages are 404s, their snapshots emptied (the rows stay listed)."""
        self.message_user(request, f"{sharing.revoke_all(queryset)} link(s) revoked.")


@admin.register(Feedback)
class FeedbackAdmin(WhatWasSaid, admin.ModelAdmin):
    """People's 👍 and 👎 on answers, read-only: by rating and model, each with its comment and
    the settings it was given with."""

    list_display = ("updated_at", "rating", "model", "comment", "conversation_link", "owner")
    list_filter = ("rating", "model", ("updated_at", admin.DateFieldListFilter))
    search_fields = ("comment", "owner", "model")
    date_hierarchy = "updated_at"
    fields = (
        "item",
        "owner",
        "rating",
        "comment",
        "model",
        "settings",
        "generation_id",
        "created_at",
        "updated_at",
    )
    readonly_fields = fields
    list_select_related = ("item__conversation",)

    @admin.display(description="conversation")
    def conversation_link(self, feedback):
        """The conversation of the answer rated, in the admin."""
        conversation = feedback.item.conversation
        change = reverse("admin:streaming_conversation_change", args=[conversation.pk])
        return format_html('<a href="{}">{}</a>', change, conversation)


def _ms(value: float | None) -> str:
    return "–" if value is None else f"{value:.1f}"
