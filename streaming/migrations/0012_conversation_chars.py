"""`Conversation.chars`: the characters a conversation's items hold (CONVERSATIONS_MAX_CHARS),
counted once for the conversations already there.

On SQLite, adding a column that is not null makes Django remake `streaming_conversation`, which
drops the search triggers on its titles (made over `title_folded` by
0010_conversation_search_folded.py): they are made again.
"""

from importlib import import_module

from django.db import migrations, models
from django.db.models import Sum
from django.db.models.functions import Length

search = import_module("streaming.migrations.0007_conversation_search")
# The titles' three triggers (the FTS table itself and its rows stay: ids are kept), made
# where missing: whether a change remakes the table depends on Django and SQLite's versions.
TITLE_TRIGGERS = [
    statement.replace("CREATE TRIGGER", "CREATE TRIGGER IF NOT EXISTS", 1)
    for statement in search._fts(search.TITLES, "streaming_conversation", "title_folded")[1:4]
]


def count(apps, schema_editor):
    """Each conversation's characters, answers still running left out (counted when they end)."""
    Conversation = apps.get_model("streaming", "Conversation")
    Item = apps.get_model("streaming", "ConversationItem")
    held = (
        Item.objects.exclude(status="in_progress")
        .values("conversation_id")
        .annotate(chars=Sum(Length("content")))
    )
    for row in held.iterator():
        Conversation.objects.filter(pk=row["conversation_id"]).update(chars=row["chars"] or 0)


class Migration(migrations.Migration):
    dependencies = [
        ("streaming", "0011_sign_in_failures"),
    ]

    operations = [
        # Backwards, RemoveField may remake the table too: the triggers again after it.
        search.VendorSQL("sqlite", [], TITLE_TRIGGERS),
        migrations.AddField(
            model_name="conversation",
            name="chars",
            field=models.PositiveBigIntegerField(default=0, editable=False),
        ),
        search.VendorSQL("sqlite", TITLE_TRIGGERS, []),
        migrations.RunPython(count, migrations.RunPython.noop),
    ]
