# A stored response's tool calls (issue 53); nullable with no default, so SQLite adds the column
# in place.

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('streaming', '0020_log_tool_calls'),
    ]

    operations = [
        migrations.AddField(
            model_name='storedresponse',
            name='steps',
            field=models.JSONField(blank=True, null=True),
        ),
    ]
