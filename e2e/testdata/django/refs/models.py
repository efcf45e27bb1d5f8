from django.db import models


class Ref(models.Model):
    """Reference data the test caches in the proxy (table ref). This is its
    shape after 0002; 0001 created it with name (60 characters), no weight
    and no index on rate."""

    id = models.IntegerField(primary_key=True)
    code = models.CharField(max_length=8, unique=True)
    title = models.CharField(max_length=120)
    rate = models.DecimalField(max_digits=10, decimal_places=4)
    weight = models.IntegerField(default=10)

    class Meta:
        db_table = "ref"
        indexes = [models.Index(fields=["rate"], name="ref_rate_idx")]


class Event(models.Model):
    """What the application writes all the time (table event, not cached)."""

    ref = models.ForeignKey(Ref, on_delete=models.PROTECT)
    kind = models.CharField(max_length=20)
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "event"
