"""`manage.py create_api_key NAME [--user USERNAME]`: a new API key, printed once."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from streaming.http import audit
from streaming.models import ApiKey


class Command(BaseCommand):
    help = "Create an API key for `Authorization: Bearer …`; only its hash is stored."

    def add_arguments(self, parser):
        parser.add_argument("name", help="what the key is for, to recognise it in the admin")
        parser.add_argument(
            "--user",
            help="the user it acts as: what it creates is theirs, "
            "seen from their session and their other keys, and counts in their "
            "limits (without --user: the key's own)",
        )

    def handle(self, *args, name: str, user: str | None, **options):
        owner = None
        if user is not None:
            try:
                owner = get_user_model().objects.get_by_natural_key(user)
            except get_user_model().DoesNotExist:
                raise CommandError(f"No user {user!r}.") from None
        row, key = ApiKey.issue(name, owner)
        whom = f"acts as {owner}" if owner else "acts as itself"
        audit.record(None, audit.KEY_CREATED, target=str(row), detail=f"{whom}; by manage.py")
        self.stderr.write(f"API key {row.prefix}… created; it is shown this once:")
        self.stdout.write(key)
