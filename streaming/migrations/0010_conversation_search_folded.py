"""Search compares text NFKC-normalised and case-folded in every script (core/text.py's
`searchable`): the titles and the items' text as searched, in their own columns, filled here,
and the index of 0007 made again over them (on SQLite, over those columns as external content;
on PostgreSQL, pg_trgm over them, where a plain LIKE now matches).

On SQLite, adding the columns makes Django remake both tables, which would drop 0007's
triggers: the index is dropped first and made again at the end. A later migration that remakes
either table must run FORWARD_SQLITE again (tests/conversations/test_search.py fails while the
triggers are missing).
"""

import importlib
import unicodedata

from django.db import migrations, models

search_0007 = importlib.import_module("streaming.migrations.0007_conversation_search")
VendorSQL = search_0007.VendorSQL
ITEMS, TITLES = search_0007.ITEMS, search_0007.TITLES

FORWARD_SQLITE = [*search_0007._fts(ITEMS, "streaming_conversationitem", "content_folded"),
                  *search_0007._fts(TITLES, "streaming_conversation", "title_folded")]
FORWARD_POSTGRESQL = [
    "CREATE INDEX conversation_item_text ON streaming_conversationitem "
    "USING gin (content_folded gin_trgm_ops)",
    "CREATE INDEX conversation_title_text ON streaming_conversation "
    "USING gin (title_folded gin_trgm_ops)",
]
BATCH = 500  # rows folded and written at a time


def searchable(value):
    """core/text.py's `searchable` as it was when this migration was written."""
    return unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", value).casefold())


def fold_all(apps, schema_editor):
    for model, source, target in (
        ("Conversation", "title", "title_folded"),
        ("ConversationItem", "content", "content_folded"),
    ):
        rows = apps.get_model("streaming", model).objects.using(schema_editor.connection.alias)
        batch = []
        for row in rows.only("pk", source).iterator(chunk_size=BATCH):
            setattr(row, target, searchable(getattr(row, source)))
            batch.append(row)
            if len(batch) == BATCH:
                rows.bulk_update(batch, [target])
                batch = []
        rows.bulk_update(batch, [target])


class Migration(migrations.Migration):

    dependencies = [
        ("streaming", "0009_conversation_penalties"),
    ]

    operations = [
        VendorSQL("sqlite", search_0007.BACKWARD_SQLITE, search_0007.FORWARD_SQLITE),
        VendorSQL("postgresql", search_0007.BACKWARD_POSTGRESQL,
                  search_0007.FORWARD_POSTGRESQL[1:]),
        migrations.AddField(
            model_name="conversation",
            name="title_folded",
            field=models.TextField(blank=True, default="", editable=False),
        ),
        migrations.AddField(
            model_name="conversationitem",
            name="content_folded",
            field=models.TextField(blank=True, default="", editable=False),
        ),
        migrations.RunPython(fold_all, migrations.RunPython.noop),
        VendorSQL("sqlite", FORWARD_SQLITE, search_0007.BACKWARD_SQLITE),
        VendorSQL("postgresql", FORWARD_POSTGRESQL, search_0007.BACKWARD_POSTGRESQL),
    ]
