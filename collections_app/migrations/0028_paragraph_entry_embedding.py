from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("collections_app", "0027_sources"),
    ]

    operations = [
        migrations.AddField(
            model_name="paragraph",
            name="entry_embedding",
            field=models.BinaryField(blank=True, null=True),
        ),
    ]
