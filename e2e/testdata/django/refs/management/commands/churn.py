"""What a Django application does all day: create an event, and a moment
later read a row of reference data, through one connection. Prints a JSON
summary: the statements the first create() sent, the id of each event,
every value read and, with --explain, where the proxy answered each read
from and why (its EXPLAIN LAST STATEMENT, on the same connection)."""
import json
import time

from django.core.management.base import BaseCommand
from django.db import connection
from django.test.utils import CaptureQueriesContext

from ._state import applied_model


class Command(BaseCommand):
    help = "create events and read ref rows in turn"

    def add_arguments(self, parser):
        parser.add_argument("--n", type=int, default=40)
        parser.add_argument("--ref", type=int, default=1)
        parser.add_argument("--gap", type=float, default=0.05)
        parser.add_argument("--explain", action="store_true")

    def handle(self, *args, n, ref, gap, explain, **options):
        Ref = applied_model("Ref")
        Event = applied_model("Event")
        first, ids, reads, served = None, [], [], []
        for i in range(n):
            with CaptureQueriesContext(connection) as q:
                ev = Event.objects.create(ref_id=ref, kind="k%d" % i)
            if first is None:
                first = [x["sql"] for x in q.captured_queries]
            ids.append(ev.id)
            time.sleep(gap)
            r = Ref.objects.get(pk=ref)
            reads.append([r.pk, r.code, str(r.rate)])
            if explain:
                with connection.cursor() as c:
                    c.execute("EXPLAIN LAST STATEMENT")
                    _, source, reason = c.fetchone()
                served.append([source, reason])
        self.stdout.write(json.dumps({
            "first_create": first,
            "event_ids": ids,
            "reads": reads,
            "served": served,
        }))
