"""Conversations in the admin: read-only (their owners write and delete them, through the APIs),
with their items, shared links and feedback, each list filtered by kind of owner or one owner."""

from __future__ import annotations

from django.contrib import admin
from django.db.models import Count, OuterRef, Q, Subquery
from django.urls import reverse
from django.utils.html import format_html
from django.utils.http import urlencode

from streaming.conversations import search, sharing
from streaming.http import audit
from streaming.models import (
    ANSWER_SETTINGS,
    Conversation,
    ConversationItem,
    Feedback,
    GenerationLog,
    SharedLink,
)
from streaming.ops import log_pages


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
        return log_pages.ms(getattr(item, "ttft", None))

    @admin.display(description="TPOT (ms)")
    def tpot(self, item):
        """Its answer's time per output token."""
        return log_pages.ms(getattr(item, "tpot", None))


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
        revoking = list(queryset.filter(revoked_at=None).select_related("conversation"))
        self.message_user(request, f"{sharing.revoke_all(queryset)} link(s) revoked.")
        for link in revoking:
            target = audit.link_target(link.token, link.conversation.conversation_id)
            audit.record(request, audit.SHARE_REVOKED, target=target)


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
