from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("streaming", "0008_generationlog_workers"),
    ]

    operations = [
        migrations.AddField(
            model_name="conversation",
            name=name,
            field=models.FloatField(blank=True, null=True),
        )
        for name in ("repetition_penalty", "frequency_penalty", "presence_penalty")
    ]
