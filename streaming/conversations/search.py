"""Search over a person's conversations: their titles and their items' text, through an index.

A query is words (split at spaces); a conversation matches when each word is in its title or
in one of its items, as a substring, whatever the case: no word boundaries are needed, so
Japanese (「東京」 in 「東京で会いましょう」) is found as English is. Query and text are compared as
core/text.py's `searchable` makes them (NFKC, then case-folded in every script: `é` finds
"ÉCOLE", `abc` finds "ＡＢＣ"), the text in the columns records.py writes beside it
(`title_folded`, `content_folded`). The index is a trigram index over those columns, one per
database vendor, made by migrations 0007 and 0010 and kept in step by the database itself:

- SQLite: FTS5 tables with the `trigram` tokenizer (SQLite ≥ 3.34), over the folded columns
  as external content, kept by triggers on insert, update and delete; a word is an FTS5
  phrase, which the trigram tokenizer matches as a substring.
- PostgreSQL: GIN indexes with pg_trgm's `gin_trgm_ops` on the folded columns; a word is a
  `LIKE '%word%'`, which pg_trgm answers from the index.

A word shorter than a trigram (most Japanese words of two characters, 「東京」) cannot be looked
up in a trigram index: it is a plain `LIKE` over the owner's conversations instead (their
titles, and the items of those), slower but bounded by CONVERSATIONS_MAX_PER_OWNER.
The figures, with and without the index: docs/bench.md ("Conversations").
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from django.db import connection, transaction
from django.db.models import Exists, OuterRef, Q
from django.db.models.expressions import RawSQL

from streaming.conversations import records
from streaming.core.text import searchable
from streaming.models import Conversation, ConversationItem

TRIGRAM = 3  # characters a word needs for the index to find it
MAX_WORDS = 8  # of a query; the rest are ignored
MAX_WORD_CHARS = 100  # of one word

# The index's objects (migration 0007 makes them; tests/conversations/test_search.py checks
# that they are there).
SQLITE_ITEMS = "streaming_conversationitem_fts"
SQLITE_TITLES = "streaming_conversation_fts"


def search(
    owner: str, query: str, *, limit: int = 50, before: str | None = None
) -> list[Conversation]:
    """The owner's conversations holding every word of `query`, newest first, a page at a
    time as records.list_for's (a query without words: all of them)."""
    if not words(query):
        return records.list_for(owner, limit=limit, before=before)
    with _planned():
        return records.list_for(owner, limit=limit, before=before, where=matching(query))


@contextmanager
def _planned() -> Iterator[None]:
    """PostgreSQL, told to prefer its indexes for this query: its planner prices a LIKE far
    below what it costs, and reads every item (a sequential scan, a hashed subplan) where the
    trigram index, or the walk of the owner's conversations that stops at the first page, is
    much faster (docs/bench.md, "Conversations")."""
    if connection.vendor != "postgresql":
        yield
        return
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")  # until this transaction ends
        yield
        # Inside an outer transaction, a savepoint's release would not undo it.
        cursor.execute("SET LOCAL enable_seqscan TO DEFAULT")


def words(query: str) -> list[str]:
    """The words of a query, as searched (folded as the text is)."""
    return [word[:MAX_WORD_CHARS] for word in searchable(query).split()[:MAX_WORDS]]


def matching(query: str) -> Q:
    """A filter on conversations: those holding every word of `query` (all, for none)."""
    found = Q()
    for word in words(query):
        found &= _holding(word)
    return found


def _holding(word: str) -> Q:
    """Conversations whose title or an item of which holds `word` (folded)."""
    if len(word) < TRIGRAM:
        return _scanned(word)
    if connection.vendor == "sqlite":
        phrase = '"' + word.replace('"', '""') + '"'  # an FTS5 string: the word as it is
        titles = RawSQL(
            f"SELECT rowid FROM {SQLITE_TITLES} WHERE {SQLITE_TITLES} MATCH %s", (phrase,)
        )
        items = RawSQL(
            f"SELECT i.conversation_id FROM streaming_conversationitem i WHERE i.id "
            f"IN (SELECT rowid FROM {SQLITE_ITEMS} WHERE {SQLITE_ITEMS} MATCH %s)",
            (phrase,),
        )
        return Q(pk__in=titles) | Q(pk__in=items)
    if connection.vendor == "postgresql":
        pattern = "%" + _escaped(word) + "%"
        titles = RawSQL(
            "SELECT id FROM streaming_conversation WHERE title_folded LIKE %s", (pattern,)
        )
        items = RawSQL(
            "SELECT conversation_id FROM streaming_conversationitem WHERE content_folded LIKE %s",
            (pattern,),
        )
        return Q(pk__in=titles) | Q(pk__in=items)
    return _scanned(word)  # another database (none is configured so): no index


def _scanned(word: str) -> Q:
    """Without the index: the title and the items of each conversation the query walks (the
    owner's, newest first, until the page is full), read through."""
    return Q(title_folded__contains=word) | Q(
        Exists(
            ConversationItem.objects.filter(
                conversation=OuterRef("pk"), content_folded__contains=word
            )
        )
    )


def _escaped(word: str) -> str:
    """`word` as a LIKE pattern matching itself (PostgreSQL's escape character is `\\`)."""
    return word.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
