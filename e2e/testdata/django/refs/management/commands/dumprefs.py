"""Prints every row of ref as the application's model (models.py) reads it,
one JSON object a line, in primary key order."""
import json

from django.core.management.base import BaseCommand

from refs.models import Ref


class Command(BaseCommand):
    help = "print the rows of ref through the model"

    def handle(self, *args, **options):
        for row in Ref.objects.order_by("pk").values():
            self.stdout.write(json.dumps(row, default=str, sort_keys=True))
