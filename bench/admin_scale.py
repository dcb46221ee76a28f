"""Scale benchmark of the admin console (not a test): 200,000 calls and 2,000,000 steps.

    python bench/admin_scale.py                   # SQLite (a file under /tmp) and PostgreSQL
    python bench/admin_scale.py --db sqlite --calls 20000 --steps 10
    python bench/admin_scale.py --db postgres     # postgres://postgres@127.0.0.1:5432 (trust)

Each database gets a fresh copy of the schema, ``--calls`` calls spread over 30 days
(1% in flight, 5% failed, a tenth of them background calls with a worker) with
``--steps`` journal steps each, then each page is requested ``--runs`` times through
Django's test client (in process: this times Django and the database, not a server),
after one warm-up request. Prints p50 and p95 in milliseconds, and the query count.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
PG_URL = "postgres://postgres@127.0.0.1:5432/mcp_admin_bench"
TOOLS = ["deploy", "slow_count", "restock", "search_products", "shop.orders.refund", "ask_with_calculator",
         "report.build", "calculator"]


def child(db: str, calls: int, steps: int, runs: int, reuse: str | None = None) -> None:
    """Runs in a fresh process per database (Django is set up once per process)."""
    if reuse:
        os.environ["DATABASE_URL"] = reuse  # a database an earlier run filled: time the pages only
    elif db == "sqlite":
        os.environ["DATABASE_URL"] = f"sqlite:///{tempfile.mkdtemp(prefix='admin-scale-')}/bench.sqlite3"
    else:
        subprocess.run(["psql", "-h", "127.0.0.1", "-U", "postgres", "-qc", "DROP DATABASE IF EXISTS mcp_admin_bench"], check=True)
        subprocess.run(["psql", "-h", "127.0.0.1", "-U", "postgres", "-qc", "CREATE DATABASE mcp_admin_bench"], check=True)
        os.environ["DATABASE_URL"] = PG_URL
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "demo_site.settings")
    os.environ["DJANGO_DEBUG"] = "0"
    os.environ.pop("REDIS_URL", None)
    import django

    django.setup()
    from django.conf import settings

    settings.ALLOWED_HOSTS = ["testserver"]
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    if reuse:
        from mcp_tools.models import ToolCall

        sample = str(ToolCall.objects.filter(status__in=["working", "input_required"]).values_list("id", flat=True)[0])
    else:
        started = time.perf_counter()
        sample = populate(calls, steps)
        print(f"[{db}] generated {calls:,} calls and {calls * steps:,} steps in {time.perf_counter() - started:.0f} s", flush=True)
    if db == "postgres" and not reuse:
        from django.db import connection

        with connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE")
    time_pages(db, sample, runs)


def populate(calls: int, steps: int) -> str:
    """Bulk-insert the rows with their own timestamps; returns the id of a call in flight with steps."""
    from django.contrib.auth.models import User
    from django.utils import timezone

    from mcp_tools.models import CallStep, ToolCall

    # Generated rows carry their own created/updated times (auto_now would stamp them all "now").
    for model, names in ((ToolCall, ("created_at", "updated_at")), (CallStep, ("created_at",))):
        for name in names:
            f = model._meta.get_field(name)
            f.auto_now = f.auto_now_add = False  # type: ignore[attr-defined]
    users = [User.objects.create_user(f"user{i}") for i in range(200)]
    User.objects.create_superuser("bench", "bench@example.com", "bench")
    rng = random.Random(200)
    now = timezone.now()
    sample = ""
    chunk = 5000
    for start in range(0, calls, chunk):
        rows, journal = [], []
        for i in range(start, min(start + chunk, calls)):
            created = now - timedelta(seconds=rng.random() * 30 * 86400) if i % 100 else now - timedelta(seconds=rng.random() * 3600)
            live = i % 100 == 0
            status = rng.choice(["working", "input_required"]) if live else ("failed" if i % 20 == 1 else "completed")
            user = users[i % len(users)]
            background = i % 10 == 3
            call = ToolCall(
                id=uuid.uuid4(), tool_name=TOOLS[i % len(TOOLS)], principal=f"user:{user.pk}", user=user,
                flavor=rng.choice(["mrtr", "session", "saga", "task"]), params_digest="0" * 64, status=status,
                arguments={"name": TOOLS[i % len(TOOLS)], "arguments": {"n": i}}, round=steps,
                progress=(i % 50) if live else None, progress_total=50 if live else None, background=background,
                celery_task_id=str(uuid.uuid4()) if background else "", worker="w1:1" if background and live else "",
                result=None if live else {"content": [{"type": "text", "text": "ok"}], "isError": status == "failed"},
                session_id=f"s{i // 7}", created_at=created, updated_at=created + timedelta(seconds=3),
                finished_at=None if live else created + timedelta(seconds=rng.random() * 30), expires_at=created + timedelta(days=1),
            )
            rows.append(call)
            if live and not sample:
                sample = str(call.id)
            for seq in range(steps):
                journal.append(CallStep(
                    call_id=call.id, seq=seq, kind="once" if seq % 3 else "elicit", key=f"k{seq}", digest="0" * 64,
                    request={"method": "elicitation/create", "params": {"message": f"Step {seq}?"}} if seq % 3 == 0 else None,
                    response={"value": seq}, status="done", created_at=created, answered_at=created,
                ))
        ToolCall.objects.bulk_create(rows, batch_size=1000)
        CallStep.objects.bulk_create(journal, batch_size=2000)
    return sample


def time_pages(db: str, sample: str, runs: int) -> None:
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext
    from django.urls import reverse

    client = Client()
    client.login(username="bench", password="bench")
    changelist = reverse("admin:mcp_tools_toolcall_changelist")
    pages = {
        "changelist (in flight, default)": changelist,
        "changelist (all 200k, newest first)": changelist + "?state=all",
        "changelist (one tool, all)": changelist + "?state=all&tool_name=deploy",
        "changelist (sorted by last activity)": changelist + "?state=all&o=-6",
        "changelist (search a call id)": changelist + "?state=all&q=" + sample,
        "call detail page": reverse("admin:mcp_tools_toolcall_change", args=[sample]),
        "dashboard": reverse("admin:mcp_tools_toolcall_dashboard"),
        "dashboard poll (unchanged)": None,
    }
    fingerprint = client.get(reverse("admin:mcp_tools_toolcall_dashboard_data")).json()["fingerprint"]
    pages["dashboard poll (unchanged)"] = reverse("admin:mcp_tools_toolcall_dashboard_data") + "?" + urlencode({"since": fingerprint})
    print(f"| {db} | page | p50 ms | p95 ms | queries |")
    for name, url in pages.items():
        assert url is not None
        assert client.get(url).status_code == 200, name  # warm-up
        times = []
        for _ in range(runs):
            with CaptureQueriesContext(connection) as queries:
                t0 = time.perf_counter()
                response = client.get(url)
                times.append((time.perf_counter() - t0) * 1000)
            assert response.status_code == 200
        times.sort()
        p95 = times[min(len(times) - 1, int(len(times) * 0.95))]
        print(f"| {db} | {name} | {statistics.median(times):.0f} | {p95:.0f} | {len(queries)} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--db", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--calls", type=int, default=200_000)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--reuse", metavar="DATABASE_URL", help="time the pages on a database an earlier run filled (one --db)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.calls, args.steps, args.runs, args.reuse)
        return
    for db in (["sqlite", "postgres"] if args.db == "both" else [args.db]):
        subprocess.run([sys.executable, __file__, "--child", db, "--calls", str(args.calls), "--steps", str(args.steps),
                        "--runs", str(args.runs), *(["--reuse", args.reuse] if args.reuse else [])], check=True, cwd=ROOT)


if __name__ == "__main__":
    main()
