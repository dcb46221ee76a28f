"""The admin console against what a review threw at it: crafted URLs, ids that do not exist,
huge calls, finished calls, and a dashboard left open after its session ended.

Each test failed before its mend: the history page told staff without the permission which
call ids exist, the changelist read every call's megabytes of JSON, the report rendered them all,
a button for a purged call said nothing, ending an ended call reported "0 call(s)" in green, a
crafted filter was a 500, a logged-out browser kept receiving the dashboard, and an exact id
search found nothing once the call had finished.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from mcp_tools import store
from mcp_tools.console import queries as console
from mcp_tools.models import ToolCall
from tests.test_admin_console import CHANGELIST, _communicator, act_url, client_for, detail_url, make_call, make_user, shown

BIG_COLUMNS = ("arguments", "result", "error", "last_outcome", "client_capabilities")


def history_url(call_id: Any) -> str:
    return reverse("admin:mcp_tools_toolcall_history", args=[call_id])


def messages_of(response: Any) -> list[tuple[str, str]]:
    return [(m.level_tag, str(m)) for m in response.context["messages"]]


@pytest.fixture
def operator() -> Client:
    return client_for(make_user("operator", perms=("view_toolcall", "change_toolcall")))


# -- 1. the history page -------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_history_page_refuses_staff_without_the_permission_whether_the_call_exists_or_not() -> None:
    intern = client_for(make_user("intern"))
    call = make_call()
    assert intern.get(history_url(call.pk)).status_code == 403
    assert intern.get(history_url(uuid.uuid4())).status_code == 403
    # Those who may look still see it, and an unknown id the admin's usual way.
    viewer = client_for(make_user("viewer", perms=("view_toolcall",)))
    assert viewer.get(history_url(call.pk)).status_code == 200
    missing = viewer.get(history_url(uuid.uuid4()), follow=True)
    assert any("doesn’t exist" in text for _, text in messages_of(missing))


# -- 2. the changelist does not read the big JSON columns -----------------------------------------


@pytest.mark.django_db
def test_the_changelist_reads_no_big_json_column_and_the_report_still_shows_them(operator: Client) -> None:
    call = make_call("deploy", "working", arguments={"blob": "x" * 10_000}, result={"answer": 42})
    with CaptureQueriesContext(connection) as queries:
        response = operator.get(reverse(CHANGELIST))
    assert response.status_code == 200 and [c.pk for c in shown(response)] == [call.pk]
    reads = [q["sql"] for q in queries.captured_queries if 'FROM "mcp_tools_toolcall"' in q["sql"]]
    assert reads
    for sql in reads:  # neither the page's SELECT nor a load of a deferred column per row
        for column in BIG_COLUMNS:
            assert f'"mcp_tools_toolcall"."{column}"' not in sql.split(" FROM ")[0]
    report = operator.get(detail_url(call)).content.decode()
    assert "x" * 10_000 in report and "&quot;answer&quot;: 42" in report


# -- 3. the report caps each JSON block ------------------------------------------------------------


def test_pretty_json_cuts_a_long_block_and_says_how_long_it_was() -> None:
    value = {"rows": list(range(50_000))}
    full = json.dumps(value, indent=2)
    limit = console.MAX_JSON_CHARS
    assert console.pretty_json(value) == f"{full[:limit]}\n… truncated, {len(full):,} characters in all"
    assert console.pretty_json({"a": 1}) == '{\n  "a": 1\n}'
    assert console.pretty_json(None) == ""


@pytest.mark.django_db
def test_the_report_of_a_call_with_megabytes_of_arguments_stays_small(operator: Client) -> None:
    # About 3 MB pretty-printed: under the default MAX_BODY_BYTES (4 MB), so any client may send it.
    call = make_call("deploy", "completed", arguments={"rows": [{"id": i, "v": "x"} for i in range(150_000)]})
    response = operator.get(detail_url(call))
    assert response.status_code == 200
    html = response.content.decode()
    assert "… truncated," in html and "characters in all" in html
    assert len(html) < 1_000_000


# -- 4. a button for a call that no longer exists -----------------------------------------------------


@pytest.mark.django_db
def test_a_button_for_a_call_that_no_longer_exists_says_so(operator: Client) -> None:
    gone = uuid.uuid4()
    response = operator.post(reverse("admin:mcp_tools_toolcall_act", args=[gone, "cancel"]), follow=True)
    assert response.status_code == 200
    assert ("warning", f"tool call with ID “{gone}” doesn’t exist. Perhaps it was deleted?") in messages_of(response)


# -- 5. ending a call that already ended ------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize(("action", "status"), [("cancel", "cancelled"), ("expire", "expired")])
def test_ending_a_call_that_already_ended_reports_no_success(operator: Client, action: str, status: str) -> None:
    done = make_call("echo", "completed")
    response = operator.post(act_url(done, action), follow=True)
    assert messages_of(response) == [("warning", "1 selected call(s) had already ended and were left as they are.")]
    live = operator.post(act_url(make_call(), action), follow=True)
    assert messages_of(live) == [("success", f"1 call(s) marked {status}.")]


@pytest.mark.django_db
def test_retrying_a_call_that_cannot_be_retried_reports_no_success(operator: Client) -> None:
    done = make_call("echo", "completed")
    response = operator.post(reverse(CHANGELIST) + "?state=all", {"action": "retry_calls", "_selected_action": [str(done.pk)]},
                             follow=True)
    assert messages_of(response) == [("warning", "1 selected call(s) are not failed background calls and were left as they are.")]


# -- 6. crafted changelist filters -------------------------------------------------------------------


CRAFTED = [
    {"tool_name__regex": "("},  # an invalid pattern: a database error on SQLite
    {"tool_name__iregex": "x"},
    {"arguments__contains": "x"},  # no contains on JSON on SQLite
    {"result__answer": "42"},  # a key transform into a JSON column
    {"steps__request__contains": "x"},  # through a relation
]


@pytest.mark.django_db
def test_a_crafted_filter_is_refused_with_400_and_every_offered_filter_still_works(operator: Client) -> None:
    alice = make_user("alice", staff=False)
    make_call("deploy", "working", user=alice, background=True)
    make_call("echo", "completed")
    for params in CRAFTED:
        assert operator.get(reverse(CHANGELIST), params).status_code == 400, params
    page = operator.get(reverse(CHANGELIST), {"state": "all"})
    changelist = page.context["cl"]
    links = [choice["query_string"] for spec in changelist.filter_specs for choice in spec.choices(changelist)]
    assert len(links) > 10  # status, tool, served as, background, user, date
    for link in links:
        assert operator.get(reverse(CHANGELIST) + link).status_code == 200, link
    assert operator.get(reverse(CHANGELIST), {"q": "deploy", "state": "all"}).status_code == 200


# -- 7. the live dashboard after its session ended -----------------------------------------------------


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("end_session", ["logout", "password change"])
async def test_the_live_dashboard_closes_once_its_session_no_longer_logs_the_operator_in(end_session: str) -> None:
    viewer = await sync_to_async(make_user)("viewer", perms=("view_toolcall",))
    call = await sync_to_async(make_call)("slow_count", "working")
    browser = Client()
    await sync_to_async(browser.force_login)(viewer)
    socket = await _communicator(f"sessionid={browser.cookies['sessionid'].value}".encode())
    assert (await socket.connect())[0]
    await socket.receive_json_from(timeout=5)
    await store.record_progress(call.pk, 3, 10, "step 3")
    assert "30%" in (await socket.receive_json_from(timeout=5))["html"], "pushes while the session lasts"

    def end() -> None:
        if end_session == "logout":
            browser.logout()
        else:
            viewer.set_password("a new password")
            viewer.save()

    await sync_to_async(end)()
    await store.record_progress(call.pk, 7, 10, "secret step 7")
    assert await socket.receive_output(timeout=5) == {"type": "websocket.close", "code": 4403}
    await socket.disconnect()


# -- an exact id search from the default "In flight" page ---------------------------------------------


@pytest.mark.django_db
def test_searching_a_call_id_finds_the_call_whatever_its_status(operator: Client) -> None:
    done = make_call("echo", "completed")
    live = make_call("deploy", "working")
    found = operator.get(reverse(CHANGELIST), {"q": str(done.pk)})
    assert [c.pk for c in shown(found)] == [done.pk]
    status_filter = next(spec for spec in found.context["cl"].filter_specs if spec.parameter_name == "state")
    assert [c["display"] for c in status_filter.choices(found.context["cl"]) if c["selected"]] == ["All"]
    # A word is still searched among the calls in flight; a status chosen still applies.
    assert [c.pk for c in shown(operator.get(reverse(CHANGELIST), {"q": "e"}))] == [live.pk]
    assert shown(operator.get(reverse(CHANGELIST), {"q": str(done.pk), "state": "live"})) == []
    assert ToolCall.objects.count() == 2


@pytest.mark.parametrize("params", [{"flavor": "a\x00"}, {"flavor__exact": "a\x00"}, {"session_id": "\x00"}, {"state": "\x00"}],
                         ids=["field", "field-filter", "secret-column", "status-filter"])
@pytest.mark.django_db
def test_a_nul_in_a_changelist_filter_is_refused_not_a_500(params: dict[str, str]) -> None:
    """PostgreSQL refuses U+0000 in a query (a 500); no column holds it: refused as a crafted lookup."""
    operator = client_for(make_user("op", perms=("view_toolcall",)))
    operator.raise_request_exception = False
    assert operator.get(reverse(CHANGELIST), params).status_code == 400


@pytest.mark.parametrize("view", ["change", "history", "delete"])
@pytest.mark.django_db
def test_a_session_page_whose_id_holds_a_nul_is_not_found_not_a_500(view: str) -> None:
    operator = client_for(make_user("op", perms=("view_toolcall", "view_mcpsession", "delete_mcpsession")))
    operator.raise_request_exception = False
    response = operator.get(reverse(f"admin:mcp_tools_mcpsession_{view}", args=["ab\x00cd"]))
    # Django's "does not exist" redirect; 403 for delete: no session is deleted in the admin.
    assert response.status_code in ((302, 404) if view != "delete" else (403,)), response.status_code


# (Sessions have no actions: tests/test_admin_session_ids.py.)
@pytest.mark.parametrize("changelist, action", [(CHANGELIST, "cancel_calls")], ids=["calls"])
@pytest.mark.django_db
def test_a_nul_in_an_actions_selected_ids_is_refused_not_a_500(changelist: str, action: str) -> None:
    operator = client_for(make_user("op", perms=("view_toolcall", "change_toolcall", "view_mcpsession", "delete_mcpsession")))
    operator.raise_request_exception = False
    response = operator.post(reverse(changelist), {"action": action, "_selected_action": ["ab\x00cd"], "index": "0"})
    assert response.status_code == 400, response.status_code


@pytest.mark.parametrize("action", ["cancel_calls", "expire_calls", "retry_calls"])
@pytest.mark.parametrize("selected", [["nonuuid"], [None, "x"], [""], ["1"]], ids=["word", "valid-and-word", "empty", "number"])
@pytest.mark.django_db
def test_a_selected_id_that_is_not_a_call_id_is_refused_not_a_500(action: str, selected: list[str | None]) -> None:
    """Django filters ``pk__in`` by the selected ids, and one that is not a UUID raised there (a 500):
    refused as a crafted POST, nothing ended or retried, not even the valid id beside it."""
    # A call the action would act on: a live one to end, a failed background one to retry.
    call = (make_call("slow_count", "failed", background=True, arguments={"n": 3}) if action == "retry_calls"
            else make_call(status="input_required"))
    operator = client_for(make_user("op", perms=("view_toolcall", "change_toolcall")))
    operator.raise_request_exception = False
    ids = [str(call.pk) if each is None else each for each in selected]
    response = operator.post(reverse(CHANGELIST) + "?state=all", {"action": action, "_selected_action": ids, "index": "0"})
    assert response.status_code == 400, response.status_code
    assert list(ToolCall.objects.values_list("pk", "status")) == [(call.pk, call.status)]


@pytest.mark.django_db
def test_a_call_s_megabyte_status_message_is_cut_on_its_page(operator: Client) -> None:
    """A tool's progress message is the client's text, stored whole: 1 MB of it made a 1.2 MB page
    (the JSON blocks were cut at MAX_JSON_CHARS, the message shown twice in full). It is cut at 10,000
    characters, in the Progress line and in the Status card."""
    for status in ("working", "cancelled"):
        call = make_call("deploy", status)
        ToolCall.objects.filter(pk=call.pk).update(status_message="A" * 1_000_000, progress=1)
        html = operator.get(detail_url(call)).content.decode()
        assert "A" * 9_999 + "…" in html and "A" * 10_001 not in html, status
        assert len(html) < 100_000, (status, len(html))
