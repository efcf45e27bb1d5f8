from django.db import migrations, models
import django.db.models.deletion


class Migration(migrations.Migration):
    initial = True

    dependencies = []

    operations = [
        migrations.CreateModel(
            name="Ref",
            fields=[
                ("id", models.IntegerField(primary_key=True, serialize=False)),
                ("code", models.CharField(max_length=8, unique=True)),
                ("name", models.CharField(max_length=60)),
                ("rate", models.DecimalField(decimal_places=4, max_digits=10)),
            ],
            options={"db_table": "ref"},
        ),
        migrations.CreateModel(
            name="Event",
            fields=[
                ("id", models.AutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("kind", models.CharField(max_length=20)),
                ("at", models.DateTimeField(auto_now_add=True)),
                ("ref", models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, to="refs.ref")),
            ],
            options={"db_table": "event"},
        ),
    ]
