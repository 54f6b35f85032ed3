"""What the migrations share (the leading `_`: Django's loader takes it for no migration)."""

from django.db import migrations


class VendorSQL(migrations.RunSQL):
    """RunSQL for one database vendor: the others skip it."""

    def __init__(self, vendor: str, sql: list[str], reverse_sql: list[str]) -> None:
        super().__init__(sql, reverse_sql)
        self.vendor = vendor

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor == self.vendor:
            super().database_forwards(app_label, schema_editor, from_state, to_state)

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor == self.vendor:
            super().database_backwards(app_label, schema_editor, from_state, to_state)
