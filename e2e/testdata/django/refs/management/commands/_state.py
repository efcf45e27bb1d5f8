from django.db import connection
from django.db.migrations.loader import MigrationLoader


def applied_model(name):
    """The app's model as the database has it now: the historical model at
    the last applied migration of refs, so the command also runs between
    0001 and 0002 (models.py is the shape after 0002)."""
    loader = MigrationLoader(connection)
    applied = sorted(k for k in loader.applied_migrations if k[0] == "refs")
    if not applied:
        raise SystemExit("no migration of refs applied")
    return loader.project_state(applied[-1]).apps.get_model("refs", name)
