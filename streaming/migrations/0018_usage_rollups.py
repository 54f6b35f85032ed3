"""The usage rollups (issue 52): the log's tokens per day (in TIME_ZONE), person and model in
`streaming_usageday`, and per UTC hour too in `streaming_usagehour`, kept equal to the log's
rows by triggers: a row written, deleted (by prune_logs) or changed moves its day's and its
hour's figures in the same transaction, whoever writes it.

Each log row gets its `day`; rows from before are given theirs here (in TIME_ZONE), then summed.
A row written without one (raw SQL) counts on its UTC day. As migration 0007 says of the search
triggers: on SQLite a later migration that makes Django remake `streaming_generationlog` drops
these triggers with the old table, and must create them again (tests/ops/test_rollup.py fails
while they are missing).
"""

from django.conf import settings
from django.db import migrations, models
from django.utils import timezone

from streaming.migrations._vendor_sql import VendorSQL

LOG = "streaming_generationlog"
FIGURES = ("generations", "prompt_tokens", "cached_tokens", "completion_tokens", "reasoning_tokens")
# What one row adds, as the rollups' figures, in FIGURES' order.
ADDED = (
    "1",
    "COALESCE({row}.prompt_tokens, 0)",
    "COALESCE({row}.cached_tokens, 0)",
    "{row}.tokens_generated",
    "{row}.reasoning_tokens",
)
# Each rollup's key: its columns, and how a row's values are written in each vendor's SQL.
DAY = {"sqlite": "COALESCE({row}.day, date({row}.created_at))",  # Django keeps UTC text
       "postgresql": "COALESCE({row}.day, ({row}.created_at AT TIME ZONE 'UTC')::date)"}
HOUR = {"sqlite": "strftime('%Y-%m-%d %H:00:00', {row}.created_at)",
        "postgresql": "date_trunc('hour', {row}.created_at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'"}
ROLLUPS = {
    "streaming_usageday": {"day": DAY, "owner": None, "model": None},
    "streaming_usagehour": {"hour": HOUR, "day": DAY, "owner": None, "model": None},
}
WATCHED = ("day, created_at, owner, model, prompt_tokens, cached_tokens, tokens_generated, "
           "reasoning_tokens")


def _key(table: str, vendor: str, row: str) -> dict[str, str]:
    """A rollup's key columns, each with the row's value."""
    return {
        column: (f"{row}.{column}" if how is None else how[vendor].format(row=row))
        for column, how in ROLLUPS[table].items()
    }


def _add(table: str, vendor: str, row: str) -> str:
    """The statement adding `row` (NEW) to its place in `table`."""
    key = _key(table, vendor, row)
    columns = ", ".join([*key, *FIGURES])
    values = ", ".join([*key.values(), *(value.format(row=row) for value in ADDED)])
    summed = ", ".join(f"{name} = {table}.{name} + excluded.{name}" for name in FIGURES)
    return (
        f"INSERT INTO {table} ({columns}) VALUES ({values}) "
        f"ON CONFLICT ({', '.join(key)}) DO UPDATE SET {summed};"
    )


def _remove(table: str, vendor: str, row: str) -> str:
    """The statements taking `row` (OLD) from its place in `table`, emptied places away."""
    where = " AND ".join(f"{column} = {value}" for column, value in _key(table, vendor, row).items())
    taken = ", ".join(
        f"{name} = {name} - {value.format(row=row)}" for name, value in zip(FIGURES, ADDED)
    )
    return f"UPDATE {table} SET {taken} WHERE {where}; DELETE FROM {table} WHERE {where} AND generations = 0;"


def _fill(table: str, vendor: str) -> str:
    """The rollup made from the log's rows (their days given already)."""
    key = _key(table, vendor, LOG)
    sums = "COUNT(*), SUM(COALESCE(prompt_tokens, 0)), SUM(COALESCE(cached_tokens, 0)), " \
           "SUM(tokens_generated), SUM(reasoning_tokens)"
    return (
        f"INSERT INTO {table} ({', '.join([*key, *FIGURES])}) "
        f"SELECT {', '.join(key.values())}, {sums} FROM {LOG} "
        f"GROUP BY {', '.join(key.values())}"
    )


def _both(statement) -> str:
    return " ".join(statement(table) for table in ROLLUPS)


FORWARD_SQLITE = [
    *(_fill(table, "sqlite") for table in ROLLUPS),
    f"CREATE TRIGGER streaming_usage_add AFTER INSERT ON {LOG} BEGIN "
    f"{_both(lambda t: _add(t, 'sqlite', 'new'))} END",
    f"CREATE TRIGGER streaming_usage_remove AFTER DELETE ON {LOG} BEGIN "
    f"{_both(lambda t: _remove(t, 'sqlite', 'old'))} END",
    f"CREATE TRIGGER streaming_usage_change AFTER UPDATE OF {WATCHED} ON {LOG} BEGIN "
    f"{_both(lambda t: _remove(t, 'sqlite', 'old'))} {_both(lambda t: _add(t, 'sqlite', 'new'))} END",
]
BACKWARD_SQLITE = [
    *(f"DROP TRIGGER IF EXISTS streaming_usage_{event}" for event in ("add", "remove", "change")),
    *(f"DELETE FROM {table}" for table in ROLLUPS),
]
FORWARD_POSTGRESQL = [
    *(_fill(table, "postgresql") for table in ROLLUPS),
    "CREATE FUNCTION streaming_usage_follow() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
    f"IF TG_OP <> 'INSERT' THEN {_both(lambda t: _remove(t, 'postgresql', 'OLD'))} END IF; "
    f"IF TG_OP <> 'DELETE' THEN {_both(lambda t: _add(t, 'postgresql', 'NEW'))} END IF; "
    "RETURN NULL; END $$",
    f"CREATE TRIGGER streaming_usage_follow AFTER INSERT OR DELETE OR UPDATE OF {WATCHED} "
    f"ON {LOG} FOR EACH ROW EXECUTE FUNCTION streaming_usage_follow()",
]
BACKWARD_POSTGRESQL = [
    f"DROP TRIGGER IF EXISTS streaming_usage_follow ON {LOG}",
    "DROP FUNCTION IF EXISTS streaming_usage_follow()",
    *(f"DELETE FROM {table}" for table in ROLLUPS),
]


def give_rows_their_day(apps, schema_editor) -> None:
    """Each row from before its day in TIME_ZONE: in SQL where the database can say it,
    else a batch at a time."""
    vendor = schema_editor.connection.vendor
    with schema_editor.connection.cursor() as cursor:
        if vendor == "postgresql":
            cursor.execute(
                f"UPDATE {LOG} SET day = (created_at AT TIME ZONE %s)::date", [settings.TIME_ZONE]
            )
            return
        if settings.TIME_ZONE == "UTC":
            cursor.execute(f"UPDATE {LOG} SET day = date(created_at)")
            return
    rows = apps.get_model("streaming", "GenerationLog").objects
    for row in rows.filter(day=None).only("created_at").iterator(chunk_size=5000):
        rows.filter(pk=row.pk).update(day=timezone.localdate(row.created_at))


class Migration(migrations.Migration):

    dependencies = [
        ('streaming', '0017_budgets'),
    ]

    operations = [
        migrations.CreateModel(
            name='UsageDay',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('owner', models.CharField(max_length=80)),
                ('model', models.CharField(max_length=200)),
                ('generations', models.PositiveIntegerField(default=0)),
                ('prompt_tokens', models.PositiveBigIntegerField(default=0)),
                ('cached_tokens', models.PositiveBigIntegerField(default=0)),
                ('completion_tokens', models.PositiveBigIntegerField(default=0)),
                ('reasoning_tokens', models.PositiveBigIntegerField(default=0)),
                ('day', models.DateField()),
            ],
            options={
                'verbose_name': 'usage day',
            },
        ),
        migrations.CreateModel(
            name='UsageHour',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('owner', models.CharField(max_length=80)),
                ('model', models.CharField(max_length=200)),
                ('generations', models.PositiveIntegerField(default=0)),
                ('prompt_tokens', models.PositiveBigIntegerField(default=0)),
                ('cached_tokens', models.PositiveBigIntegerField(default=0)),
                ('completion_tokens', models.PositiveBigIntegerField(default=0)),
                ('reasoning_tokens', models.PositiveBigIntegerField(default=0)),
                ('hour', models.DateTimeField()),
                ('day', models.DateField()),
            ],
            options={
                'verbose_name': 'usage hour',
            },
        ),
        migrations.AddField(
            model_name='generationlog',
            name='day',
            field=models.DateField(blank=True, editable=False, null=True),
        ),
        migrations.AddIndex(
            model_name='generationlog',
            index=models.Index(fields=['owner', '-created_at'], name='log_by_owner'),
        ),
        migrations.AddIndex(
            model_name='generationlog',
            index=models.Index(fields=['model', '-created_at'], name='log_by_model'),
        ),
        migrations.AddIndex(
            model_name='generationlog',
            index=models.Index(fields=['status', '-created_at'], name='log_by_status'),
        ),
        migrations.AddIndex(
            model_name='usageday',
            index=models.Index(fields=['owner', 'day'], name='usage_day_by_owner'),
        ),
        migrations.AddConstraint(
            model_name='usageday',
            constraint=models.UniqueConstraint(fields=('day', 'owner', 'model'), name='usage_day_once'),
        ),
        migrations.AddConstraint(
            model_name='usagehour',
            constraint=models.UniqueConstraint(fields=('hour', 'day', 'owner', 'model'), name='usage_hour_once'),
        ),
        migrations.RunPython(give_rows_their_day, migrations.RunPython.noop),
        VendorSQL("sqlite", FORWARD_SQLITE, BACKWARD_SQLITE),
        VendorSQL("postgresql", FORWARD_POSTGRESQL, BACKWARD_POSTGRESQL),
    ]
