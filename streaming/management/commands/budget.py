"""`manage.py budget (--user NAME | --group NAME | --key NAME) --tokens N [--period day|month]`:
set a token budget (the admin's, from a shell), or `--remove` it; `manage.py budget` lists them."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management.base import BaseCommand, CommandError

from streaming.models import ApiKey, Budget, BudgetPeriod


class Command(BaseCommand):
    help = "Set, remove or list token budgets per user, group member or API key (docs/usage.md)."

    def add_arguments(self, parser):
        scope = parser.add_mutually_exclusive_group()
        scope.add_argument("--user", help="a username: that user's tokens, their keys' included")
        scope.add_argument("--group", help="a group's name: each member's tokens")
        scope.add_argument("--key", help="an API key's name: that key's tokens")
        parser.add_argument("--period", choices=BudgetPeriod.values, default="day")
        parser.add_argument("--tokens", type=int, help="tokens per period, prompt and answer")
        parser.add_argument("--remove", action="store_true", help="remove this budget instead")

    def handle(self, *args, user, group, key, period, tokens, remove, **options):
        if not (user or group or key):
            for budget in Budget.objects.select_related("user", "group", "api_key"):
                self.stdout.write(str(budget))
            return
        scope = {"user": _find(get_user_model(), "username", user)} if user else {}
        scope |= {"group": _find(Group, "name", group)} if group else {}
        scope |= {"api_key": _find(ApiKey, "name", key)} if key else {}
        if remove:
            removed, _ = Budget.objects.filter(period=period, **scope).delete()
            self.stdout.write(f"{removed} budget(s) removed.")
            return
        if tokens is None or tokens < 0:
            raise CommandError("Say how many tokens per period: --tokens N (0 or more).")
        budget, _ = Budget.objects.update_or_create(
            period=period, **scope, defaults={"tokens": tokens}
        )
        self.stdout.write(str(budget))


def _find(model, field: str, value: str):
    found = list(model.objects.filter(**{field: value})[:2])
    if len(found) != 1:
        many = "several" if found else "no"
        raise CommandError(f"There are {many} {model._meta.verbose_name}s with {field} {value!r}.")
    return found[0]
