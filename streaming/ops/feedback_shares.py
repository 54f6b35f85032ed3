"""The share of 👍 among an answer's ratings, per model and day: the admin dashboard's feedback
chart and table (docs/conversations.md, "Feedback").

A rating counts on the day it was last given (a changed rating moves), in the admin's time zone.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta

from django.db.models import Count, Q
from django.db.models.functions import TruncDate
from django.utils import timezone

from streaming.models import Feedback

MAX_MODELS = 6  # lines on one chart: the most rated models


@dataclass(frozen=True)
class ModelShare:
    """One model's ratings in the window: 👍, 👎, and the 👍 share per day (None: none that day)."""

    model: str
    up: int
    down: int
    daily: list[float | None]

    @property
    def share(self) -> float | None:
        """The share of 👍 over the whole window."""
        total = self.up + self.down
        return self.up / total if total else None


def days_between(start: datetime, end: datetime) -> list[date]:
    """Every local day the window touches, oldest first."""
    first, last = timezone.localtime(start).date(), timezone.localtime(end).date()
    return [first + timedelta(days=n) for n in range((last - first).days + 1)]


def shares(start: datetime, end: datetime, days: list[date], model: str = "") -> list[ModelShare]:
    """Each model rated in the window (or only `model`), the most rated first (MAX_MODELS of
    them), per day."""
    rated = Feedback.objects.filter(updated_at__gte=start, updated_at__lt=end)
    if model:
        rated = rated.filter(model=model)
    counted: dict[str, dict[date, tuple[int, int]]] = {}
    for row in (
        rated.annotate(day=TruncDate("updated_at", tzinfo=timezone.get_current_timezone()))
        .values("model", "day")
        .annotate(up=Count("pk", filter=Q(rating=1)), total=Count("pk"))
    ):
        counted.setdefault(row["model"], {})[row["day"]] = (row["up"], row["total"])
    found = []
    for model, by_day in counted.items():
        up = sum(u for u, _ in by_day.values())
        total = sum(t for _, t in by_day.values())
        daily = [by_day[day][0] / by_day[day][1] if day in by_day else None for day in days]
        found.append(ModelShare(model, up, total - up, daily))
    found.sort(key=lambda one: (-(one.up + one.down), one.model))
    return found[:MAX_MODELS]
