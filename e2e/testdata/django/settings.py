"""Settings of the end-to-end test's Django project: one app, MySQL backend,
the connection from DB_HOST, DB_PORT, DB_USER, DB_PASSWORD and DB_NAME."""
import os

SECRET_KEY = "e2e-test-only"
DEBUG = False
USE_TZ = False
INSTALLED_APPS = ["refs"]
DEFAULT_AUTO_FIELD = "django.db.models.AutoField"

DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.mysql",
        "HOST": os.environ["DB_HOST"],
        "PORT": os.environ["DB_PORT"],
        "USER": os.environ["DB_USER"],
        "PASSWORD": os.environ["DB_PASSWORD"],
        "NAME": os.environ["DB_NAME"],
        # One connection for the whole command, as a worker process keeps.
        "CONN_MAX_AGE": None,
    }
}

# LOG_SQL=1 logs the statements to stderr (a migration's each before it is
# sent), so a failing migration shows the step that failed.
if os.environ.get("LOG_SQL") == "1":
    DEBUG = True
    LOGGING = {
        "version": 1,
        "disable_existing_loggers": False,
        "handlers": {"stderr": {"class": "logging.StreamHandler"}},
        "loggers": {"django.db.backends": {"handlers": ["stderr"], "level": "DEBUG"}},
    }
