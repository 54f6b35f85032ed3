# A run's tool calls in its log row (issue 53); nullable with no default, so SQLite adds the
# column in place and keeps the rollups' triggers (0018).

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('streaming', '0019_conversation_tools'),
    ]

    operations = [
        migrations.AddField(
            model_name='generationlog',
            name='tool_calls',
            field=models.JSONField(blank=True, null=True),
        ),
    ]
