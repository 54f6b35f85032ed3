# A conversation's MCP servers and an answer's tool calls (issue 53); nullable with no default,
# so SQLite adds each column in place and keeps the search triggers (migrations 0010, 0012).

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('streaming', '0018_usage_rollups'),
    ]

    operations = [
        migrations.AddField(
            model_name='conversation',
            name='mcp_servers',
            field=models.JSONField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='conversationitem',
            name='steps',
            field=models.JSONField(blank=True, null=True),
        ),
    ]
