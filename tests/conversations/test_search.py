"""Search over titles and text (streaming/conversations/search.py), on SQLite's FTS5 trigram
index and PostgreSQL's pg_trgm: English and Japanese, every word, owners apart, an index kept in
step with every write, and the page's `GET /api/conversations?q=`."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test import Client

from streaming.conversations import records, search
from streaming.models import ConversationItem, ItemStatus

pytestmark = pytest.mark.django_db

ME, SOMEONE = "ip:127.0.0.1", "user:99"  # the test Client's owner (loopback, no cookie)


def found(query: str, owner: str = ME) -> list[str]:
    return [c.title for c in search.search(owner, query, limit=50)]


@pytest.fixture
def library():
    """Three conversations of mine and one of someone else's."""
    records.create(
        ME,
        items=[
            ("user", "How do Server-Sent Events work?"),
            ("assistant", "An EventSource reads a text/event-stream."),
        ],
    )
    records.create(
        ME,
        title="東京旅行",
        items=[
            ("user", "ストリーミングについて詳しく教えてください"),
            ("assistant", "トークンが生成されるたびに送ります。"),
        ],
    )
    records.create(
        ME,
        items=[
            ("user", "Python generators"),
            ("assistant", "They yield values lazily; 100% lazy_ish."),
        ],
    )
    records.create(SOMEONE, items=[("user", "Secret EventSource plans in 東京")])


def test_english_words_are_found_in_text_and_titles_whatever_their_case(library):
    assert found("eventsource") == ["How do Server-Sent Events work?"]
    assert found("SERVER-SENT") == ["How do Server-Sent Events work?"]
    assert found("generators") == ["Python generators"]
    assert found("nothing-like-this") == []


def test_japanese_is_found_inside_words_long_and_short(library):
    assert found("ストリーミング") == ["東京旅行"]  # inside 「ストリーミングについて」
    assert found("生成され") == ["東京旅行"]  # in the answer
    assert found("東京") == ["東京旅行"]  # two characters: shorter than a trigram
    assert found("旅") == ["東京旅行"]


def test_every_word_must_be_there(library):
    assert found("eventsource stream") == ["How do Server-Sent Events work?"]
    assert found("eventsource ストリーミング") == []
    assert found("東京 ストリーミング") == ["東京旅行"]


def test_another_owners_conversations_are_never_found(library):
    assert found("Secret") == []
    assert found("plans", SOMEONE) == ["Secret EventSource plans in 東京"]
    assert found("eventsource", SOMEONE) == ["Secret EventSource plans in 東京"]


def test_like_patterns_and_quotes_are_plain_text(library):
    assert found("100%") == ["Python generators"]
    assert found("lazy_ish") == ["Python generators"]
    assert found("lazy%ish") == []
    assert found('"lazily;') == []  # a quote is a character, not FTS5 syntax
    assert found("%") == ["Python generators"]


def test_the_index_follows_every_write(library):
    # In capitals: a write that left its folded column behind would not be found.
    conversation = records.create(ME, items=[("user", "first words")])
    answer = records.append(
        conversation,
        [("assistant", "")],
        after=records.last_shown(conversation),
        status=ItemStatus.IN_PROGRESS,
        generation_id="ab" * 16,
    )[0]
    records.checkpoint({"ab" * 16: "checkpointed KANGAROO"})
    assert found("kangaroo") == ["first words"]
    records.finish_answer("ab" * 16, "a final WOMBAT", ItemStatus.COMPLETED, "stop")
    assert (found("kangaroo"), found("wombat")) == ([], ["first words"])
    records.update(conversation, title="Renamed PLATYPUS")
    assert (found("first"), found("platypus")) == (["Renamed PLATYPUS"], ["Renamed PLATYPUS"])
    records.forget_item(conversation, answer)
    assert found("wombat") == []
    records.delete(conversation)
    assert found("platypus") == found("first") == []
    assert not ConversationItem.objects.filter(content__contains="WOMBAT").exists()


def test_the_index_is_there():
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")
            triggers = {row[0] for row in cursor.fetchall()}
            expected = {
                f"{table}_{event}"
                for table in (search.SQLITE_ITEMS, search.SQLITE_TITLES)
                for event in ("insert", "update", "delete")
            }
            assert expected <= triggers  # a migration that remade a table dropped them
        else:
            cursor.execute("SELECT indexname FROM pg_indexes WHERE indexdef LIKE '%gin_trgm_ops%'")
            assert {row[0] for row in cursor.fetchall()} == {
                "conversation_item_text",
                "conversation_title_text",
            }


def test_the_page_api_searches_with_q_a_page_at_a_time(library):
    for n in range(3):
        records.create(ME, items=[("user", f"streaming note {n}")])
    client = Client()
    page = client.get("/api/conversations", {"q": "streaming note", "limit": 2}).json()
    assert [c["title"] for c in page["data"]] == ["streaming note 2", "streaming note 1"]
    assert page["has_more"]
    rest = client.get(
        "/api/conversations", {"q": "streaming note", "limit": 2, "before": page["data"][-1]["id"]}
    ).json()
    assert [c["title"] for c in rest["data"]] == ["streaming note 0"]
    assert not rest["has_more"]
    assert client.get("/api/conversations", {"q": "東京"}).json()["data"][0]["title"] == "東京旅行"
    assert len(client.get("/api/conversations", {"q": "  "}).json()["data"]) == 6  # no words


@pytest.fixture
def accents():
    """Text in other scripts' cases and in compatibility forms (full-width, half-width,
    ligatures, a decomposed accent)."""
    records.create(ME, title="ÉCOLE D'ÉTÉ", items=[("user", "Ωμέγα ΣΟΦΙΑ")])
    records.create(
        ME, title="Straße", items=[("user", "ＡＢＣ ﬁne ｶﾀｶﾅ"), ("assistant", "cafe\u0301")]
    )


SCHOOL, STREET = "ÉCOLE D'ÉTÉ", "Straße"


@pytest.mark.parametrize(
    ("query", "titles"),
    [
        ("é", [STREET, SCHOOL]),  # shorter than a trigram: the scan; é decomposed in "café"
        ("ÉtÉ", [SCHOOL]),
        ("école", [SCHOOL]),  # the index
        ("σοφια", [SCHOOL]),
        ("σοφία", []),  # case is folded, accents are kept
        ("ωμέγα", [SCHOOL]),
        ("ω", [SCHOOL]),
        ("strasse", [STREET]),  # ß folds to ss
        ("STRAßE", [STREET]),
        ("abc", [STREET]),  # full-width letters are letters
        ("ａｂ", [STREET]),
        ("fine", [STREET]),  # the ligature is two letters
        ("カタカナ", [STREET]),  # half-width katakana is katakana
        ("ｶﾀ", [STREET]),
        ("café", [STREET]),  # e + a combining accent is é
        ("CAFÉ", [STREET]),
    ],
)
def test_case_is_folded_in_every_script_and_compatibility_forms_are_one(accents, query, titles):
    assert found(query) == titles


def test_the_page_api_folds_the_query_as_the_text(accents, library):
    response = Client().get("/api/conversations", {"q": "éC"})  # SQLite's LIKE folds ASCII only
    assert [c["title"] for c in response.json()["data"]] == [SCHOOL]
    assert found("東京") == ["東京旅行"]  # Japanese as it was


def test_a_nul_in_a_models_answer_is_stored_as_a_replacement_character():
    # An upstream's answer is under way when a NUL comes: kept (PostgreSQL's text holds none),
    # as U+FFFD, where a client's NUL is refused at the door.
    conversation = records.create(ME, items=[("user", "question")])
    records.append(
        conversation,
        [("assistant", "")],
        after=records.last_shown(conversation),
        status=ItemStatus.IN_PROGRESS,
        generation_id="cd" * 16,
    )
    records.checkpoint({"cd" * 16: "so\x00far"})
    records.finish_answer("cd" * 16, "all\x00done", ItemStatus.COMPLETED, "stop")
    answer = records.last_shown(conversation)
    assert answer.content == "all\ufffddone"
    assert found("done") == ["question"]
