"""Token budgets (docs/usage.md): which apply to a request, the claim taken before any stream
starts, and the count when its answer ends.

A budget caps one user's tokens, each member's of one group, or one API key's, per calendar day
or month (in TIME_ZONE). A user's and their groups' budgets count on the user's counter (their
keys' answers included), a key's on the key's. A request is admitted while every counter it is
checked on has tokens that neither ended answers nor running ones have taken; it then claims
up to its max_tokens of what the tightest has left, so that two requests at the last tokens
cannot both pass. Its answer's prompt and answer tokens replace the claim when it ends: an
answer that crosses the limit finishes, and the next request is refused.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.db.models import Q
from django.utils import timezone

from streaming.core.exceptions import BudgetExceeded
from streaming.core.request import GenerationRequest
from streaming.models import Budget
from streaming.usage.counters import COUNTS, SETTLING, Counter, Verdict

PERIOD_NAMES = {"day": "daily", "month": "monthly"}


@dataclass(frozen=True)
class Applying:
    """One budget as it applies to a request now: the counter it is checked on, and when its
    period starts again."""

    budget: Budget
    counter: Counter
    resets_at: datetime

    def details(self, used: int) -> dict:
        """The refusal's figures, for a client to word in its own language."""
        return {
            "id": self.budget.pk,
            "scope": self.budget.scope,
            "period": self.budget.period,
            "tokens": self.budget.tokens,
            "used": used,
            "resets_at": self.resets_at.isoformat(),
        }


def period_of(period: str, now: datetime) -> tuple[str, datetime]:
    """The period a moment falls in, as its counters name it, and when the next one starts."""
    name, _, resets_at = period_bounds(period, now)
    return name, resets_at


def period_bounds(period: str, now: datetime) -> tuple[str, datetime, datetime]:
    """The period a moment falls in: its name, its start and the next one's."""
    local = timezone.localtime(now)
    start = local.replace(hour=0, minute=0, second=0, microsecond=0)
    if period == "day":
        return f"day:{start.date().isoformat()}", start, start + timedelta(days=1)
    start = start.replace(day=1)
    return f"month:{start:%Y-%m}", start, (start + timedelta(days=32)).replace(day=1)


async def applying(user_id: int | None, key_id: int | None, now: datetime) -> list[Applying]:
    """Every budget of this user (theirs, their groups') and of this key, one query."""
    if user_id is None and key_id is None:
        return []
    query = Q(pk__in=[])
    if user_id is not None:
        query |= Q(user_id=user_id) | Q(group__user=user_id)
    if key_id is not None:
        query |= Q(api_key_id=key_id)
    found = []
    async for budget in Budget.objects.filter(query).select_related("user", "group", "api_key"):
        subject = f"key:{key_id}" if budget.api_key_id is not None else f"user:{user_id}"
        period, start, resets_at = period_bounds(budget.period, now)
        counter = Counter(subject, period, budget.tokens, since=start)
        found.append(Applying(budget, counter, resets_at))
    return found


@dataclass(eq=False)
class BudgetClaim:
    """The tokens one generation holds on its counters until it ends (registry's `Charge`)."""

    counters: list[Counter]
    claim: Verdict
    generation_id: str
    settled: bool = field(default=False)

    def settle(self, used: int) -> None:
        """Replace the claim by the tokens the answer used (0: it never started); once."""
        if self.settled:
            return
        self.settled = True
        SETTLING.get().add(self.counters, self.claim, used, self.generation_id)


Payer = tuple[int | None, int | None]  # a user id and an API key id (Generation.payer)


@dataclass(frozen=True)
class Found:
    """The budgets that apply to one payer now: the tightest per counter (looked up once per
    HTTP request: one admitted and started at once asks twice)."""

    payer: Payer
    now: datetime
    tightest: dict[tuple[str, str], Applying]

    @property
    def counters(self) -> list[Counter]:
        """The counters they are checked on."""
        return [one.counter for one in self.tightest.values()]


async def look_up(payer: Payer) -> Found:
    """Every budget that applies to the payer now, the tightest per counter."""
    now = timezone.now()
    tightest: dict[tuple[str, str], Applying] = {}
    for one in sorted(await applying(*payer, now), key=lambda one: -one.budget.tokens):
        tightest[one.counter.subject, one.counter.period] = one
    return Found(payer, now, tightest)


async def check(found: Found, prompt: int) -> None:
    """Refuse, with BudgetExceeded, a request whose payer has a budget with fewer tokens left
    than its `prompt` takes (at least one); it claims nothing (a created generation claims
    when its stream starts: `claim`)."""
    if not found.tightest:
        return
    used = await COUNTS.get().used(found.counters)
    for one, count in zip(found.tightest.values(), used, strict=True):
        if one.counter.limit - count < max(1, prompt):
            raise refusal(one, count, found.now, prompt)


async def claim(found: Found, asked: GenerationRequest) -> BudgetClaim | None:
    """Claim a request's tokens on every budget of its payer (None: none applies): its
    prompt's, which must be left (the answer cannot make them fewer), and up to its
    `max_tokens` more of what the tightest has left; else BudgetExceeded naming the budget
    that has too few (the tightest, of those)."""
    if not found.tightest:
        return None
    counters = found.counters
    need = max(1, asked.prompt_tokens)
    verdict = await COUNTS.get().claim(counters, need + asked.max_tokens, need)
    if verdict.full is None:
        return BudgetClaim(counters, verdict, asked.id)
    full = found.tightest[verdict.full.subject, verdict.full.period]
    raise refusal(full, verdict.used, found.now, asked.prompt_tokens)


def refusal(full: Applying, used: int, now: datetime, prompt: int = 0) -> BudgetExceeded:
    """The 429 for a budget with too few tokens left, with Retry-After at its reset."""
    budget = full.budget
    left = budget.tokens - used
    why = (
        f"has {left:,} tokens left, fewer than this request's prompt (about {prompt:,})"
        if left > 0
        else f"is used up: {used:,} tokens used or held by running answers"
    )
    message = (
        f"The {PERIOD_NAMES[budget.period]} budget of {budget.scope} ({budget.tokens:,} tokens) "
        f"{why}. It resets at {full.resets_at:%Y-%m-%d %H:%M} {full.resets_at.tzname()}."
    )
    return BudgetExceeded(
        message,
        retry_after_s=(full.resets_at - now).total_seconds(),
        details={"budget": full.details(used)},
    )


async def standing(user_id: int | None, key_id: int | None) -> list[dict]:
    """Every budget that applies to this person now, tightest first, with its tokens used
    (running answers' claims included) and left (`GET /api/usage`)."""
    now = timezone.now()
    budgets = await applying(user_id, key_id, now)
    used = await COUNTS.get().used([one.counter for one in budgets]) if budgets else []
    rows = [
        {**one.details(count), "left": max(0, one.budget.tokens - count)}
        for one, count in zip(budgets, used, strict=True)
    ]
    return sorted(rows, key=lambda row: (row["left"], row["tokens"]))
