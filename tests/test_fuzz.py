"""2,000 seeded malformed requests per protocol era, in process: no 5xx, no traceback, no rows, still alive.

The cases come from ``bench/fuzz.py`` (which also runs the larger 10,000-case
measurement of docs/robustness.md); ``MCP_FUZZ_SEED`` and ``MCP_FUZZ_COUNT``
change the seed and the size.
"""

from __future__ import annotations

import gc
import logging
import os

import pytest

from bench.fuzz import ERAS, echo_still_answers, fuzz
from demo_site.inventory.models import Product
from mcp_tools.transports.http import McpEndpoint

pytestmark = pytest.mark.django_db(transaction=True)

SEED = int(os.environ.get("MCP_FUZZ_SEED", "7"))
COUNT = int(os.environ.get("MCP_FUZZ_COUNT", "2000"))


@pytest.mark.parametrize("era", ERAS)
async def test_malformed_requests_get_clean_refusals(era: str, caplog: pytest.LogCaptureFixture,
                                                     earlier_garbage_collected: None) -> None:
    from asgiref.sync import sync_to_async

    caplog.set_level(logging.ERROR, logger="asyncio")
    await sync_to_async(Product.objects.create)(sku="WID-001", name="Widget", price="2.50", stock=4)
    app = McpEndpoint()
    report = await fuzz(app, era, COUNT, SEED)
    print(f"\n[fuzz] seed {SEED}: {report.line()}")
    assert report.cases == COUNT
    assert report.refused > COUNT // 2, "most cases must be refused (else the fuzzer is not breaking anything)"
    assert not report.violations, "\n".join(report.violations[:20])
    assert not any(status >= 500 for status in report.statuses)
    assert await echo_still_answers(app)
    # The GETs cut after 0.5 s (report.held_open) left no task of theirs pending: one the garbage
    # collector destroyed pending was logged, and once failed CI as an unraisable exception.
    gc.collect()
    assert not [r for r in caplog.records if "destroyed but it is pending" in r.getMessage()]


async def test_json_nested_deeper_than_the_stack_is_a_parse_error() -> None:
    """Found by the fuzzer: ``[[[[...`` (100,000 deep) raised RecursionError in the decoder, answered with HTTP 500."""
    from tests.asgi_client import post_headers, request

    response = await request(McpEndpoint(), "POST", headers=post_headers(extra={"mcp-method": "tools/list"}), body=b"[" * 100_000)
    assert response.status == 400
    assert response.json()["error"]["code"] == -32700
