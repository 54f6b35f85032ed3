"""Usage, budgets and fairness in the admin (docs/usage.md): budgets with what they used this
period, groups' priorities, the usage page's view (ops/usage_page.py, with the budgets' standing
handed in) and a link to it from each user's page."""

from __future__ import annotations

from typing import Any

from asgiref.sync import async_to_sync
from django import forms
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import UserAdmin
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.http import urlencode

from streaming.admin_audit import Audited
from streaming.core.exceptions import RedisUnreachable
from streaming.core.text import is_number
from streaming.models import Budget, GroupPriority, Identity
from streaming.ops import usage_page
from streaming.usage import budgets
from streaming.usage.counters import COUNTS, Counter

SCOPES = {"user": "a user", "group": "a group", "api_key": "an API key"}


def page(request: HttpRequest) -> dict[str, Any] | HttpResponse:
    """The usage page (`/admin/streaming/generationlog/usage/`), or its CSV (`?format=csv`)."""
    if request.GET.get("format") == "csv":
        return usage_page.csv_response(request)
    return usage_page.context(request, standing=standing)


def standing(person: str) -> list[dict[str, Any]] | None:
    """The budgets that apply to a user or a key of nobody now, with their tokens used and left
    (none for an anonymous browser); None when the counters cannot be read (Redis is down)."""
    kind, _, number = person.partition(":")
    if kind not in ("user", "key") or not is_number(number):
        return []
    user_id, key_id = (int(number), None) if kind == "user" else (None, int(number))
    try:
        return async_to_sync(budgets.standing)(user_id, key_id)
    except RedisUnreachable:
        return None


def person_page(owner: str) -> str:
    """One person's usage page: their days, models, budgets and generations."""
    return f"{reverse('admin:streaming_generationlog_usage')}?{urlencode({'person': owner})}"


class BudgetForm(forms.ModelForm):
    """A budget names exactly one of a user, a group or an API key (the table's check refuses
    the rest with a message nobody could act on)."""

    class Meta:
        model = Budget
        fields = ("user", "group", "api_key", "period", "tokens")

    def clean(self):
        """Exactly one scope, said in words, before the model's constraints are checked."""
        chosen = [name for name in SCOPES if self.cleaned_data.get(name)]
        if not chosen:
            raise ValidationError(
                "Choose whose tokens this budget caps: a user, a group or an API key.",
                code="no_scope",
            )
        if len(chosen) > 1:
            raise ValidationError(
                "Choose only one of a user, a group or an API key (this form has "
                f"{' and '.join(SCOPES[name] for name in chosen)}): make one budget for each.",
                code="several_scopes",
            )
        return super().clean()


@admin.register(Budget)
class BudgetAdmin(Audited, admin.ModelAdmin):
    """Budgets, the tightest first, each with the tokens it counted this period; each change
    in the audit log."""

    audited_fields = ("user", "group", "api_key", "period", "tokens")

    form = BudgetForm
    list_display = ("scope_link", "period", "limit", "used")
    list_filter = ("period",)
    search_fields = ("user__username", "group__name", "api_key__name")
    autocomplete_fields = ("user", "group", "api_key")
    fieldsets = (
        (
            "Whose tokens",
            {
                "fields": ("user", "group", "api_key"),
                "description": "Exactly one: a user (their API keys' answers included), "
                "each member of a group (each on their own count), or an API key (its own "
                "answers, whoever it acts as).",
            },
        ),
        ("How many", {"fields": ("period", "tokens")}),
    )

    def get_queryset(self, request):
        """With the scope's names (one query for the page)."""
        return super().get_queryset(request).select_related("user", "group", "api_key")

    @admin.display(description="scope")
    def scope_link(self, budget: Budget) -> str:
        """Whose tokens, linking to the person's usage (a group's members each have theirs)."""
        owner = _owner(budget)
        if owner is None:
            return budget.scope
        return format_html('<a href="{}">{}</a>', person_page(owner), budget.scope)

    @admin.display(description="tokens", ordering="tokens")
    def limit(self, budget: Budget) -> str:
        """The limit per period."""
        return f"{budget.tokens:,}"

    @admin.display(description="used this period")
    def used(self, budget: Budget) -> str:
        """What the budget's counter holds now (running answers' claims included), and its
        share of the limit; a group's count is each member's own."""
        owner = _owner(budget)
        if owner is None:
            return "each member's own"
        period, since, _ = budgets.period_bounds(budget.period, timezone.now())
        counter = Counter(owner, period, budget.tokens, since=since)
        try:
            [used] = async_to_sync(COUNTS.get().used)([counter])
        except RedisUnreachable:
            return "– (Redis unreachable)"
        return f"{used:,} ({used / budget.tokens:.0%})" if budget.tokens else f"{used:,}"


def _owner(budget: Budget) -> str | None:
    """The counter a user's or a key's budget counts on (a group's has one per member)."""
    if budget.user_id is not None:
        return f"user:{budget.user_id}"
    if budget.api_key_id is not None:
        return f"key:{budget.api_key_id}"
    return None


@admin.register(GroupPriority)
class GroupPriorityAdmin(Audited, admin.ModelAdmin):
    """Which groups' requests go first when an engine is full: the highest priority first;
    each change in the audit log."""

    audited_fields = ("group", "priority")

    list_display = ("group", "priority")
    list_editable = ("priority",)
    search_fields = ("group__name",)
    autocomplete_fields = ("group",)
    ordering = ("-priority", "group__name")


User = get_user_model()
# Importing django.contrib.auth.admin (above) registered its UserAdmin: this one replaces it.
admin.site.unregister(User)


@admin.register(User)
class PersonAdmin(Audited, UserAdmin):
    """Django's user admin, with links to the person's usage and generations; a change of
    what they may do (their groups decide their models, budgets and priority) in the audit
    log."""

    audited_fields = ("username", "is_active", "is_staff", "is_superuser", "groups")

    fieldsets = (*UserAdmin.fieldsets, ("Usage", {"fields": ("usage",)}))
    readonly_fields = (*UserAdmin.readonly_fields, "usage")

    @admin.display(description="usage")
    def usage(self, user) -> str:
        """Their usage page (days, models, budgets) and their generations in the log."""
        owner = f"user:{user.pk}"
        generations = reverse("admin:streaming_generationlog_changelist")
        return format_html(
            '<a href="{}">Usage and budgets</a> · <a href="{}?{}">Generations</a>',
            person_page(owner),
            generations,
            urlencode({"owner__exact": owner}),
        )


@admin.register(Identity)
class IdentityAdmin(Audited, admin.ModelAdmin):
    """Who each person is at the identity provider: moving one to another account links that
    account to their sign-ins from then on (docs/security.md); each change in the audit log."""

    audited_fields = ("user", "issuer", "subject")
    list_display = ("user", "subject", "issuer", "created_at")
    search_fields = ("user__username", "=subject")
    autocomplete_fields = ("user",)
    readonly_fields = ("issuer", "subject", "created_at")

    def has_add_permission(self, request) -> bool:
        """Made by a first sign-in only."""
        return False
