"""``python manage.py demo_setup``: a ready-to-try demo in one command.

Migrates the database, creates the demo products, an ``admin`` superuser and
a DRF token for it, and prints how to connect an MCP client. Safe to run
again: existing products keep their stock, the admin keeps its token.
"""

from __future__ import annotations

import getpass
import os
import sys
from decimal import Decimal
from typing import Any
from urllib.parse import urlsplit

from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandParser
from django.db import transaction

DEMO_PRODUCTS = [
    ("WID-001", "Widget", Decimal("9.99"), 120),
    ("WID-002", "Widget, large", Decimal("14.50"), 8),
    ("GAD-001", "Gadget", Decimal("24.00"), 35),
    ("GAD-002", "Gadget Pro", Decimal("79.00"), 3),
    ("SPR-001", "Sprocket", Decimal("1.25"), 1000),
    ("CAB-001", "USB-C cable, 1 m", Decimal("6.90"), 0),
]

ADMIN_USERNAME = "admin"

#: Addresses that mean "every interface" to a server (``HOST=0.0.0.0 scripts/demo``), with the
#: loopback address a browser or client on this machine reaches it at instead. No client can
#: send them as a host (the demo's ALLOWED_HOSTS refuses them), so they are never printed.
WILDCARD_LOOPBACK = {"0.0.0.0": "127.0.0.1", "::": "[::1]"}


def reachable_base_url(base_url: str) -> tuple[str, str | None]:
    """``base_url`` with a wildcard listening address replaced by loopback, and that address (else None).

    >>> reachable_base_url("http://0.0.0.0:9000")
    ('http://127.0.0.1:9000', '0.0.0.0')
    """
    parts = urlsplit(base_url)
    loopback = WILDCARD_LOOPBACK.get(parts.hostname or "")
    if loopback is None:
        return base_url, None
    netloc = loopback if parts.port is None else f"{loopback}:{parts.port}"
    return parts._replace(netloc=netloc).geturl(), parts.hostname


class Command(BaseCommand):
    help = "Migrate, create demo products, an admin user and its API token, and print how to connect."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--no-input",
            "--noinput",
            action="store_false",
            dest="interactive",
            help="Do not prompt; take the admin password from DEMO_ADMIN_PASSWORD (default 'admin').",
        )
        parser.add_argument(
            "--host",
            default="http://127.0.0.1:8000",
            help="The base URL printed for the MCP endpoint (default http://127.0.0.1:8000).",
        )

    def handle(self, *args: Any, interactive: bool = True, host: str = "http://127.0.0.1:8000", **options: Any) -> None:
        verbosity = options.get("verbosity", 1)
        call_command("migrate", interactive=False, verbosity=max(0, verbosity - 1))

        created = self._create_products()
        if verbosity > 1:
            self.stdout.write(f"Products: {created} created, {len(DEMO_PRODUCTS) - created} already present.")

        from demo_site.shop.seed import seed_shop

        shop = seed_shop()
        if verbosity > 1:
            self.stdout.write(f"Shop: {shop['orders']} orders created.")

        from demo_site.operations.seed import seed_events

        events = seed_events()
        if verbosity > 1:
            self.stdout.write(f"Operations: {events} events created.")

        password = self._admin_password(interactive)
        user, _ = self._create_admin(password)
        from rest_framework.authtoken.models import Token

        token, _ = Token.objects.get_or_create(user=user)

        from mcp_tools.conf import mcp_settings

        host, wildcard = reachable_base_url(host)
        mcp_url = host.rstrip("/") + "/" + mcp_settings.PATH.lstrip("/")
        if password is None:
            password_note = "password unchanged"
        elif os.environ.get("DEMO_ADMIN_PASSWORD"):
            password_note = "password from DEMO_ADMIN_PASSWORD"
        elif password == "admin":
            password_note = "password 'admin'"
        else:
            password_note = "the password you typed"
        # Only what to do next: the server itself is started by scripts/demo.
        lines = [
            "",
            self.style.SUCCESS("The demo is ready."),
            f"  MCP endpoint:  {mcp_url}",
            f"  API token:     {token.key}   (send it as 'Authorization: Token {token.key}')",
            f"  Admin:         {host.rstrip('/')}/admin/  user {ADMIN_USERNAME!r}, {password_note}",
            "                 (staff users 'clerk' and 'viewer' too, password: the username;",
            "                 in the calls console 'clerk' may cancel, expire and retry, 'viewer' only look)",
            "Connect a client:",
            "  Python:     .venv/bin/pip install -e '.[client]', then the README's \"Call it with a real client\"",
            f"              (with {mcp_url} as its URL)",
            "  Inspector:  (needs Node 22.19 or later)",
            f"              npx @modelcontextprotocol/inspector@2.12.0 --cli {mcp_url} --transport http \\",
            f"                --header 'Authorization: Token {token.key}' --protocol-era modern --method tools/list",
            f"  Terminal:   .venv/bin/python manage.py mcp_call echo --arg text=hello --user {ADMIN_USERNAME}",
            "Stop the demo with Ctrl-C.",
        ]
        if wildcard is not None:
            lines[2:2] = [
                f"  The server listens on all interfaces ({wildcard}); the URLs below are this machine's.",
                "  From another machine, use this machine's name or address, added to DJANGO_ALLOWED_HOSTS first.",
            ]
        self.stdout.write("\n".join(lines))

    # -- steps -----------------------------------------------------------
    def _create_products(self) -> int:
        from demo_site.inventory.models import Product

        created = 0
        with transaction.atomic():
            for sku, name, price, stock in DEMO_PRODUCTS:
                _, was_created = Product.objects.get_or_create(sku=sku, defaults={"name": name, "price": price, "stock": stock})
                created += was_created
        return created

    def _admin_password(self, interactive: bool) -> str | None:
        """The password to set (None: keep the existing admin's password).

        DEMO_ADMIN_PASSWORD wins; otherwise it is asked for (interactive) or,
        for a new admin, ``admin``.
        """
        from_env = os.environ.get("DEMO_ADMIN_PASSWORD")
        if from_env:
            return from_env
        exists = get_user_model().objects.filter(username=ADMIN_USERNAME).exists()
        if interactive and sys.stdin.isatty():
            hint = "empty: keep the current one" if exists else "empty: 'admin'"
            typed = getpass.getpass(f"Password for {ADMIN_USERNAME!r} ({hint}): ")
            if typed:
                return typed
        return None if exists else "admin"

    def _create_admin(self, password: str | None) -> tuple[Any, bool]:
        User = get_user_model()
        with transaction.atomic():
            user, created = User.objects.get_or_create(
                username=ADMIN_USERNAME, defaults={"email": "admin@example.com", "is_staff": True, "is_superuser": True}
            )
            changed = False
            if not (user.is_staff and user.is_superuser and user.is_active):
                user.is_staff = user.is_superuser = user.is_active = True
                changed = True
            if password is not None:
                user.set_password(password)
                changed = True
            if changed or created:
                user.save()
        return user, created
