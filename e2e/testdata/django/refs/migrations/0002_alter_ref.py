# Alters ref, the table the test has cached in the proxy by now.
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("refs", "0001_initial")]

    operations = [
        migrations.AddField(
            model_name="ref",
            name="weight",
            field=models.IntegerField(default=10),
        ),
        migrations.AlterField(
            model_name="ref",
            name="name",
            field=models.CharField(max_length=120),
        ),
        migrations.AddIndex(
            model_name="ref",
            index=models.Index(fields=["rate"], name="ref_rate_idx"),
        ),
        migrations.RenameField(
            model_name="ref",
            old_name="name",
            new_name="title",
        ),
    ]
