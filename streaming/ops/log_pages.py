"""The admin's list of the log (admin.py) at the size of a month of use: nothing it shows reads
the whole log. Its count is the rollup's where nothing narrows the list, and stops at a cap
where something does; its filters' choices are fixed or the rollup's models; its pages are the
newest rows of an index (the log's, by owner, model and status, each newest first)."""

from __future__ import annotations

from functools import cached_property

from django.contrib import admin
from django.core.paginator import Paginator
from django.db.models import Sum

from streaming.models import UsageDay

COUNT_CAP = 10_000  # rows counted of a narrowed list: past it, "10,000 or more"
APIS = (("native", "native API"), ("openai", "chat completions"), ("responses", "Responses API"))


class LogPaginator(Paginator):
    """Pages of the log: the whole log counted by the rollup (which the database keeps equal
    to it), a narrowed list only up to COUNT_CAP rows (its last page is COUNT_CAP's)."""

    @cached_property
    def count(self) -> int:
        """How many rows the list has, or COUNT_CAP past it."""
        rows = self.object_list
        if not rows.query.where:
            return UsageDay.objects.aggregate(rows=Sum("generations"))["rows"] or 0
        return rows.order_by()[:COUNT_CAP].count()


class ModelFilter(admin.SimpleListFilter):
    """By model: the models the rollup has (a few, where the log has millions of rows)."""

    title = "model"
    parameter_name = "model__exact"  # the usage page's and the dashboard's links say so too

    def lookups(self, request, model_admin):
        """Each model that answered, and the one chosen if the rollup has not seen it."""
        models = UsageDay.objects.order_by("model").values_list("model", flat=True).distinct()
        named = [(model, model) for model in models]
        chosen = self.value()
        return named if chosen is None or chosen in dict(named) else [*named, (chosen, chosen)]

    def queryset(self, request, queryset):
        """One model's rows."""
        return queryset if self.value() is None else queryset.filter(model=self.value())


class ApiFilter(admin.SimpleListFilter):
    """By the API that asked: a fixed list, not the log's distinct values."""

    title = "API"
    parameter_name = "api__exact"

    def lookups(self, request, model_admin):
        """The three APIs."""
        return APIS

    def queryset(self, request, queryset):
        """One API's rows."""
        return queryset if self.value() is None else queryset.filter(api=self.value())


def ms(value: float | None) -> str:
    """Milliseconds in a list's column."""
    return "–" if value is None else f"{value:.1f}"
