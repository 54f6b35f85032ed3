"""The search index over conversations' titles and items' text (streaming/conversations/search.py):
FTS5 trigram tables kept by triggers on SQLite, pg_trgm GIN indexes on PostgreSQL.

On SQLite, a later migration that makes Django remake `streaming_conversationitem` or
`streaming_conversation` (most column changes do: a new table, the rows copied, the old one
dropped) drops these triggers with the old table: such a migration must run FORWARD_SQLITE's
triggers again. tests/conversations/test_search.py fails while they are missing.
"""

from django.db import migrations

from streaming.migrations._vendor_sql import VendorSQL

ITEMS, TITLES = "streaming_conversationitem_fts", "streaming_conversation_fts"


def _fts(table: str, source: str, column: str) -> list[str]:
    """An FTS5 trigram table over `source.column` (external content: the text is not stored
    twice), its three triggers, and the rows already there indexed."""
    changed = f"old.{column} IS NOT new.{column}"
    return [
        f"CREATE VIRTUAL TABLE {table} USING fts5({column}, content='{source}', "
        f"content_rowid='id', tokenize='trigram')",
        f"CREATE TRIGGER {table}_insert AFTER INSERT ON {source} BEGIN "
        f"INSERT INTO {table}(rowid, {column}) VALUES (new.id, new.{column}); END",
        f"CREATE TRIGGER {table}_delete AFTER DELETE ON {source} BEGIN "
        f"INSERT INTO {table}({table}, rowid, {column}) VALUES ('delete', old.id, "
        f"old.{column}); END",
        f"CREATE TRIGGER {table}_update AFTER UPDATE OF {column} ON {source} "
        f"WHEN {changed} BEGIN "
        f"INSERT INTO {table}({table}, rowid, {column}) VALUES ('delete', old.id, "
        f"old.{column}); "
        f"INSERT INTO {table}(rowid, {column}) VALUES (new.id, new.{column}); END",
        f"INSERT INTO {table}({table}) VALUES ('rebuild')",
    ]


FORWARD_SQLITE = [*_fts(ITEMS, "streaming_conversationitem", "content"),
                  *_fts(TITLES, "streaming_conversation", "title")]
BACKWARD_SQLITE = [statement for table in (ITEMS, TITLES) for statement in (
    *(f"DROP TRIGGER IF EXISTS {table}_{event}" for event in ("insert", "delete", "update")),
    f"DROP TABLE IF EXISTS {table}")]
# pg_trgm ships with PostgreSQL (contrib) and is a trusted extension since PostgreSQL 13: the
# database's owner may create it.
FORWARD_POSTGRESQL = [
    "CREATE EXTENSION IF NOT EXISTS pg_trgm",
    "CREATE INDEX conversation_item_text ON streaming_conversationitem "
    "USING gin (content gin_trgm_ops)",
    "CREATE INDEX conversation_title_text ON streaming_conversation "
    "USING gin (title gin_trgm_ops)",
]
BACKWARD_POSTGRESQL = ["DROP INDEX IF EXISTS conversation_item_text",
                       "DROP INDEX IF EXISTS conversation_title_text"]


class Migration(migrations.Migration):

    dependencies = [
        ("streaming", "0006_conversations"),
    ]

    operations = [
        VendorSQL("sqlite", FORWARD_SQLITE, BACKWARD_SQLITE),
        VendorSQL("postgresql", FORWARD_POSTGRESQL, BACKWARD_POSTGRESQL),
    ]
