from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("collections_app", "0028_source_labels"),
    ]

    operations = [
        migrations.AddField(
            model_name="paragraph",
            name="entry_embedding",
            field=models.BinaryField(blank=True, null=True),
        ),
    ]
