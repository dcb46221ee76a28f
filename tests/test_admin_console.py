"""The operator's console in the admin: pages, filters, actions, permissions, bounded queries, signals, live pushes."""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from html import unescape
from datetime import timedelta
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.db import connection
from django.test import Client, override_settings
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from mcp_tools import store
from mcp_tools.models import CallStep, ToolCall
from mcp_tools.registry import make_tool, registry
from tests.asgi_client import call_modern

User = get_user_model()
CHANGELIST = "admin:mcp_tools_toolcall_changelist"
DASHBOARD = "admin:mcp_tools_toolcall_dashboard"
DATA = "admin:mcp_tools_toolcall_dashboard_data"


def detail_url(call: ToolCall) -> str:
    return reverse("admin:mcp_tools_toolcall_change", args=[call.pk])


def act_url(call: ToolCall, action: str) -> str:
    return reverse("admin:mcp_tools_toolcall_act", args=[call.pk, action])


def make_user(username: str, *, staff: bool = True, perms: tuple[str, ...] = ()) -> Any:
    user = User.objects.create_user(username, f"{username}@example.com", "pw", is_staff=staff)
    for codename in perms:
        user.user_permissions.add(Permission.objects.get(content_type__app_label="mcp_tools", codename=codename))
    return user


def client_for(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def operator() -> Client:
    """Staff who may look and act."""
    return client_for(make_user("operator", perms=("view_toolcall", "change_toolcall")))


@pytest.fixture
def viewer() -> Client:
    """Staff who may look only."""
    return client_for(make_user("viewer", perms=("view_toolcall",)))


def make_call(tool: str = "deploy", status: str = "input_required", *, user: Any = None, steps: int = 1, **fields: Any) -> ToolCall:
    principal = f"user:{user.pk}" if user is not None else fields.pop("principal", "anonymous")
    call = ToolCall.objects.create(
        tool_name=tool, principal=principal, user=user, flavor=fields.pop("flavor", "mrtr"), params_digest="0" * 64,
        status=status, arguments=fields.pop("arguments", {"service": "api"}), **fields,
    )
    for seq in range(steps):
        CallStep.objects.create(
            call=call, seq=seq, kind="elicit", key=f"target{seq}", digest="0" * 64,
            request={"method": "elicitation/create", "params": {"message": f"Target {seq}?"}},
            response={"action": "accept", "content": {"env": "staging"}} if seq < steps - 1 else None,
            status="done" if seq < steps - 1 else "pending",
        )
    return call


def shown(response: Any) -> list[ToolCall]:
    return list(response.context["cl"].result_list)


# -- the changelist ----------------------------------------------------------------------------


@pytest.mark.django_db
def test_calls_in_flight_are_the_default_view(operator: Client) -> None:
    working = make_call("slow_count", "working")
    waiting = make_call("deploy", "input_required")
    done = make_call("echo", "completed")
    response = operator.get(reverse(CHANGELIST))
    assert response.status_code == 200
    assert {c.pk for c in shown(response)} == {working.pk, waiting.pk}
    everything = operator.get(reverse(CHANGELIST), {"state": "all"})
    assert {c.pk for c in shown(everything)} == {working.pk, waiting.pk, done.pk}
    completed = operator.get(reverse(CHANGELIST), {"state": "completed"})
    assert [c.pk for c in shown(completed)] == [done.pk]
    # A status nobody knows is refused the admin's way (a redirect with ?e=1), not a 500.
    bogus = operator.get(reverse(CHANGELIST), {"state": "nonsense"})
    assert bogus.status_code == 302 and "e=1" in bogus["Location"]


@pytest.mark.django_db
def test_columns_show_badge_username_progress_steps_and_worker(operator: Client) -> None:
    alice = make_user("alice", staff=False)
    call = make_call("deploy", "working", user=alice, steps=3, progress=3, progress_total=4, background=True,
                     celery_task_id="1234abcd-task", worker="host:42", lease_expires_at=timezone.now() + timedelta(seconds=30))
    gone = make_call("echo", "working", principal="user:999")
    html = operator.get(reverse(CHANGELIST)).content.decode()
    assert 'class="mcp-badge mcp-working"' in html
    assert "alice" in html and f"user:{alice.pk}<" not in html  # the username, not the principal id
    assert "user:999 (deleted user)" in html
    assert 'class="mcp-progress"' in html and "75%" in html
    assert "running on host:42" in html and "1234abcd" in html
    assert "background" in html
    row = next(c for c in shown(operator.get(reverse(CHANGELIST))) if c.pk == call.pk)
    assert row.step_count == 3
    assert gone.pk in {c.pk for c in shown(operator.get(reverse(CHANGELIST)))}


@pytest.mark.django_db
def test_filters_by_tool_flavor_background_user_and_date(operator: Client) -> None:
    alice = make_user("alice", staff=False)
    deploy = make_call("deploy", user=alice)
    count = make_call("slow_count", "working", flavor="session", background=True)
    old = make_call("deploy")
    ToolCall.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(days=40))
    url = reverse(CHANGELIST)
    assert [c.pk for c in shown(operator.get(url, {"tool_name": "slow_count"}))] == [count.pk]
    assert [c.pk for c in shown(operator.get(url, {"flavor": "session"}))] == [count.pk]
    assert [c.pk for c in shown(operator.get(url, {"background__exact": "1"}))] == [count.pk]
    assert [c.pk for c in shown(operator.get(url, {"user__id__exact": alice.pk}))] == [deploy.pk]
    week_ago = (timezone.now() - timedelta(days=7)).isoformat()  # what the "Past 7 days" link sends
    recent = operator.get(url, {"created_at__gte": week_ago})
    assert {c.pk for c in shown(recent)} == {deploy.pk, count.pk}


def _tool_choices(response: Any) -> list[dict[str, Any]]:
    changelist = response.context["cl"]
    spec = next(spec for spec in changelist.filter_specs if spec.title == "tool")
    return [choice for choice in spec.choices(changelist) if choice["display"] != "All"]


@pytest.mark.django_db
def test_the_tool_filter_lists_registered_names_and_a_few_recent_ones_whatever_clients_read(operator: Client) -> None:
    """Resource reads record the URI the client chose: the filter must not list every name ever recorded."""
    ToolCall.objects.bulk_create([
        ToolCall(method="resources/read", tool_name=f"shop://products/{n}", principal="anonymous", flavor="mrtr",
                 params_digest="0" * 64, status="completed")
        for n in range(1000)
    ])
    retired = make_call("retired_tool", "completed")  # no longer registered, recorded last:
    ToolCall.objects.filter(pk=retired.pk).update(created_at=timezone.now() + timedelta(seconds=1))
    response = operator.get(reverse(CHANGELIST))
    assert response.content.decode().count(">shop://products/") <= 10
    names = [choice["display"] for choice in _tool_choices(response)]
    registered = {t.name for t in registry.tools} | {p.name for p in registry.prompts} | {r.uri for r in registry.resources if r.uri}
    assert "echo" in names and set(names) >= registered
    unregistered = [name for name in names if name not in registered]
    assert "retired_tool" in unregistered and len(unregistered) <= 10, unregistered
    # Any name still filters from the URL, and the list shows it chosen.
    chosen = operator.get(reverse(CHANGELIST), {"tool_name": "shop://products/3", "state": "all"})
    assert [c.tool_name for c in shown(chosen)] == ["shop://products/3"]
    assert [c["display"] for c in _tool_choices(chosen) if c["selected"]] == ["shop://products/3"]
    assert [c.pk for c in shown(operator.get(reverse(CHANGELIST), {"tool_name": "retired_tool", "state": "all"}))] == [retired.pk]
    nul = operator.get(reverse(CHANGELIST), {"tool_name": "a\x00b", "state": "all"})  # PostgreSQL refuses NUL in a query
    assert nul.status_code == 400  # refused as any crafted lookup (admin.refused_lookup), not a 500


@pytest.mark.django_db
def test_search_by_tool_call_id_principal_and_task_id(operator: Client) -> None:
    deploy = make_call("deploy", principal="user:77")
    task = make_call("crunch", "working", celery_task_id="celery-task-1", background=True)
    url = reverse(CHANGELIST)
    assert [c.pk for c in shown(operator.get(url, {"q": "crunch"}))] == [task.pk]
    assert [c.pk for c in shown(operator.get(url, {"q": str(deploy.pk)}))] == [deploy.pk]
    assert [c.pk for c in shown(operator.get(url, {"q": "user:77"}))] == [deploy.pk]
    assert [c.pk for c in shown(operator.get(url, {"q": "celery-task-1"}))] == [task.pk]
    uuid_task = make_call("crunch", "working", celery_task_id=str(uuid.uuid4()), background=True)
    assert [c.pk for c in shown(operator.get(url, {"q": f" {uuid_task.celery_task_id} "}))] == [uuid_task.pk]
    # Text that is not a call id searches the other fields and finds nothing: no error.
    response = operator.get(url, {"q": "no-such-thing"})
    assert response.status_code == 200 and shown(response) == []


@pytest.mark.django_db
def test_sorting_by_age_and_last_activity(operator: Client) -> None:
    first = make_call("a", "working")
    second = make_call("b", "working")
    now = timezone.now()
    ToolCall.objects.filter(pk=first.pk).update(created_at=now - timedelta(hours=2), updated_at=now)
    ToolCall.objects.filter(pk=second.pk).update(created_at=now - timedelta(hours=1), updated_at=now - timedelta(hours=1))
    # list_display: 1 status, 2 tool, 3 principal, 4 served, 5 age, 6 last activity.
    oldest_first = shown(operator.get(reverse(CHANGELIST), {"o": "5"}))
    assert [c.pk for c in oldest_first] == [first.pk, second.pk]
    quietest_first = shown(operator.get(reverse(CHANGELIST), {"o": "6"}))
    assert [c.pk for c in quietest_first] == [second.pk, first.pk]


@pytest.mark.django_db
def test_sorting_by_steps_lists_each_call_once_by_its_count(operator: Client) -> None:
    """Found by a review: the column was named like the reverse relation (``ToolCall.steps``), so Django
    ordered by the relation, joining the steps: each call was listed once per step, not by its count."""
    few = make_call("a", "working", steps=1)
    many = make_call("b", "working", steps=4)
    some = make_call("c", "working", steps=2)
    # list_display: 1 status, 2 tool, 3 principal, 4 served, 5 age, 6 last activity, 7 progress, 8 steps.
    html = operator.get(reverse(CHANGELIST)).content.decode()
    assert re.search(r'column-step_total">\s*<div class="text"><a href="\?o=8[."]', html)  # the header's own sort link
    ascending = shown(operator.get(reverse(CHANGELIST), {"o": "8"}))
    assert [c.pk for c in ascending] == [few.pk, some.pk, many.pk]
    descending = shown(operator.get(reverse(CHANGELIST), {"o": "-8"}))
    assert [c.pk for c in descending] == [many.pk, some.pk, few.pk]


@pytest.mark.django_db
def test_a_long_journal_shows_its_first_and_last_steps_and_counts_the_rest(operator: Client) -> None:
    """Found by a review: a call of 2,000 ``ctx.once`` steps made a 41 MB page (each block is capped,
    the page was not). The page shows the first and last 50 steps and says how many it leaves out."""
    long = make_call("deploy", "input_required", steps=130)
    html = operator.get(detail_url(long)).content.decode()
    shown_steps = [int(seq) for seq in re.findall(r"<strong>#(\d+) ", html)]
    assert shown_steps == [*range(50), *range(80, 130)], shown_steps
    assert "Steps (130)" in html and "30 more steps, not shown here." in html
    short = make_call("deploy", "input_required", steps=100)
    html = operator.get(detail_url(short)).content.decode()
    assert [int(seq) for seq in re.findall(r"<strong>#(\d+) ", html)] == list(range(100))
    assert "Steps (100)" in html and "not shown here" not in html


def _count_queries(client: Client, url: str, params: dict[str, Any] | None = None) -> int:
    with CaptureQueriesContext(connection) as queries:
        response = client.get(url, params or {})
    assert response.status_code == 200, response.status_code
    return len(queries)


def _populate(n: int, steps: int = 3) -> list[ToolCall]:
    calls = []
    for i in range(n):
        user = make_user(f"caller{i}-{uuid.uuid4().hex[:6]}", staff=False)
        calls.append(make_call(f"tool{i % 4}", ["working", "input_required", "failed", "completed"][i % 4], user=user,
                               steps=steps, progress=i, progress_total=n, background=bool(i % 2),
                               celery_task_id=f"task-{i}", session_id=f"s{i % 3}", finished_at=timezone.now()))
    return calls


@pytest.mark.django_db
def test_page_query_counts_do_not_grow_with_rows(operator: Client) -> None:
    """The changelist, a detail page and the dashboard: same number of queries for 4 calls and for 40."""
    small = _populate(4)

    def page_counts() -> dict[str, int]:
        return {
            "changelist": _count_queries(operator, reverse(CHANGELIST)),
            "all": _count_queries(operator, reverse(CHANGELIST), {"state": "all"}),
            "detail": _count_queries(operator, detail_url(small[0])),
            "dashboard": _count_queries(operator, reverse(DASHBOARD)),
            "data": _count_queries(operator, reverse(DATA)),
        }

    counts_small = page_counts()
    _populate(36, steps=6)
    counts_large = page_counts()
    assert counts_large == counts_small
    assert counts_small["changelist"] <= 12, counts_small
    assert counts_small["detail"] <= 10, counts_small
    assert counts_small["dashboard"] <= 14, counts_small


# -- the detail page ----------------------------------------------------------------------------


@pytest.mark.django_db
def test_detail_page_reads_like_a_report(operator: Client) -> None:
    alice = make_user("alice", staff=False)
    call = make_call("deploy", "completed", user=alice, steps=2,
                     arguments={"name": "deploy", "arguments": {"service": "api", "notes": "ünïcode"}},
                     result={"content": [{"type": "text", "text": "deployed"}],
                             "_meta": {"nextTool": {"tool": "verify", "arguments": {"service": "api"}}}},
                     celery_task_id="task-xyz", background=True, session_id="sess-1",
                     expires_at=timezone.now() + timedelta(hours=1))
    CallStep.objects.create(call=call, seq=2, kind="once", key="audit", digest="0" * 64, response=41, status="done",
                            answered_at=timezone.now())
    follow = make_call("verify", "working", user=alice)
    sibling = make_call("echo", "completed", session_id="sess-1")
    response = operator.get(detail_url(call))
    assert response.status_code == 200
    html = unescape(response.content.decode())
    arguments = html.split("<h2>Arguments</h2>")[1].split("</section>")[0]
    assert '"service": "api"' in arguments and "ünïcode" in arguments  # pretty-printed, not escaped to \u
    assert '"name"' not in arguments, "the tool's arguments, not the request's params"
    assert "Target 0?" in html and "Target 1?" in html  # the elicitations asked
    assert "staging" in html  # the answer to the first one
    assert "Side effect (once)" in html and "Recorded value" in html
    assert "deployed" in html and 'id="mcp-result"' in html
    assert "task-xyz" in html
    assert "Token expiry" in html and "(in " in html
    assert "alice" in html
    assert str(follow.pk) in html, "the call its nextTool suggested is linked"
    assert str(sibling.pk) in html, "a call of the same session is linked"
    assert 'id="mcp-cancel"' not in html, "a finished call offers no cancel"


@pytest.mark.django_db
def test_detail_page_of_a_failed_call_shows_the_error_and_came_from(operator: Client) -> None:
    before = make_call("plan", "completed", principal="user:5",
                       result={"content": [], "_meta": {"nextTool": {"tool": "deploy", "arguments": {}}}})
    ToolCall.objects.filter(pk=before.pk).update(created_at=timezone.now() - timedelta(minutes=5))
    call = make_call("deploy", "failed", principal="user:5", error={"code": -32603, "message": "boom"})
    html = operator.get(detail_url(call)).content.decode()
    assert "boom" in html and 'id="mcp-error"' in html
    assert str(before.pk) in html, "the call whose nextTool suggested this one is linked"


@pytest.mark.django_db
def test_unknown_call_redirects_to_the_changelist(operator: Client) -> None:
    response = operator.get(reverse("admin:mcp_tools_toolcall_change", args=[uuid.uuid4()]))
    assert response.status_code == 302


# -- the dashboard ------------------------------------------------------------------------------


@pytest.mark.django_db
def test_dashboard_counts_charts_and_lists(operator: Client) -> None:
    make_call("deploy", "input_required")
    make_call("slow_count", "working")
    for _ in range(2):
        make_call("flaky", "failed")
    done = make_call("echo", "completed", finished_at=timezone.now() + timedelta(seconds=7))
    old = make_call("deploy", "completed")
    ToolCall.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(days=3))
    response = operator.get(reverse(DASHBOARD))
    assert response.status_code == 200
    html = response.content.decode()
    assert "Last hour: 5 call(s)" in html and "Last 24 hours: 5 call(s)" in html  # the 3-day-old one is out
    assert "<svg" in html and "mcp-bar" in html and "5 call(s), 2 failed" in html
    assert "flaky" in html.split('id="mcp-failing"')[1]
    assert str(done.pk) in html.split('id="mcp-slowest"')[1]
    oldest = html.split('id="mcp-oldest"')[1].split("</section>")[0]
    assert "deploy" in oldest and "slow_count" in oldest and "echo" not in oldest
    assert 'data-ws-path="/mcp-tools/console/ws/"' in html
    assert "mcp_tools/console.js" in html


@pytest.mark.django_db
def test_dashboard_polling_endpoint_answers_unchanged_until_a_call_changes(operator: Client) -> None:
    call = make_call("deploy", "input_required")
    first = operator.get(reverse(DATA)).json()
    assert "deploy" in first["html"]
    same = operator.get(reverse(DATA), {"since": first["fingerprint"]}).json()
    assert same == {"fingerprint": first["fingerprint"], "unchanged": True}
    # Found by a review: a quiet dashboard that polled was never rendered again (its ages, "last hour"
    # counts and chart frozen); past 30 s since its last render (the page says how long, ``age``) it is.
    assert operator.get(reverse(DATA), {"since": first["fingerprint"], "age": "5000"}).json()["unchanged"] is True
    stale = operator.get(reverse(DATA), {"since": first["fingerprint"], "age": "30000"}).json()
    assert stale["fingerprint"] == first["fingerprint"] and "deploy" in stale["html"]
    ToolCall.objects.end(call.pk, "cancelled")
    moved = operator.get(reverse(DATA), {"since": first["fingerprint"]}).json()
    assert moved["fingerprint"] != first["fingerprint"] and "html" in moved


@pytest.mark.django_db
def test_the_app_index_and_changelist_link_to_the_dashboard(operator: Client) -> None:
    dashboard = reverse(DASHBOARD)
    assert dashboard in operator.get(reverse("admin:app_list", args=["mcp_tools"])).content.decode()
    assert dashboard in operator.get(reverse(CHANGELIST)).content.decode()


# -- actions ------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_cancel_from_the_detail_page_ends_the_call_and_is_logged(operator: Client) -> None:
    call = make_call("deploy", "input_required")
    assert 'id="mcp-cancel"' in operator.get(detail_url(call)).content.decode()
    response = operator.post(act_url(call, "cancel"))
    assert response.status_code == 302 and response["Location"] == detail_url(call)
    call.refresh_from_db()
    assert call.status == "cancelled" and call.status_message == "Cancelled by an operator."
    entry = LogEntry.objects.get(object_id=str(call.pk))
    assert entry.action_flag == CHANGE and entry.user.username == "operator"
    assert "cancelled" in entry.get_change_message()


def _act_as(login: str, call: ToolCall, action: str) -> None:
    staff = client_for(make_user(login, perms=("view_toolcall", "change_toolcall")))
    assert staff.post(act_url(call, action)).status_code == 302


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("action, status, message", [
    ("cancel", "cancelled", "Cancelled by an operator."),
    ("expire", "failed", "Expired by an operator."),  # a task expired reads "failed" (2026-07-28)
])
async def test_the_client_of_a_call_an_operator_ended_is_told_so_but_not_who_did(action: str, status: str, message: str) -> None:
    """The row's status message reaches the call's client (a task's ``statusMessage``): it says an
    operator ended the call, never the operator's login (an email address, with an email login). An
    expired task said "The task expired before it finished." (a ttl's words) instead."""
    from demo_site.asgi import application

    call = await sync_to_async(make_call)(
        "slow_compute", "working", steps=0, flavor="task", background=True, is_task=True, method="tools/call",
        arguments={"name": "slow_compute", "arguments": {"seconds": 60}},
    )
    await sync_to_async(_act_as)("alice.ops@corp.example", call, action)
    response = await call_modern(application, "tasks/get", {"taskId": str(call.pk)},
                                 capabilities={"extensions": {"io.modelcontextprotocol/tasks": {}}},
                                 headers={"mcp-name": str(call.pk)})
    body = response.body.decode()
    assert response.status == 200, body
    task = json.loads(body)["result"]
    assert (task["status"], task["statusMessage"]) == (status, message), task
    if status == "failed":  # the same words in the task's error (they were the ttl's there too)
        assert task["error"]["message"] == message, task
    assert "alice.ops" not in body, body


@pytest.mark.django_db
def test_operator_actions_leave_the_client_a_neutral_message_and_staff_the_name(operator: Client) -> None:
    """Every way an operator ends calls (the buttons, the changelist's actions) leaves the same neutral
    message; the call's page says who did it (from the History)."""
    by_button = make_call("deploy", "working")
    _act_as("alice.ops@corp.example", by_button, "cancel")
    expired_by_button = make_call("deploy", "working")
    operator.post(act_url(expired_by_button, "expire"))
    in_bulk = [make_call("deploy", "working") for _ in range(2)]
    operator.post(reverse(CHANGELIST), {"action": "cancel_calls", "_selected_action": [str(in_bulk[0].pk)]})
    operator.post(reverse(CHANGELIST), {"action": "expire_calls", "_selected_action": [str(in_bulk[1].pk)]})
    messages = {c.pk: (c.status, c.status_message) for c in ToolCall.objects.all()}
    assert messages == {
        by_button.pk: ("cancelled", "Cancelled by an operator."),
        expired_by_button.pk: ("expired", "Expired by an operator."),
        in_bulk[0].pk: ("cancelled", "Cancelled by an operator."),
        in_bulk[1].pk: ("expired", "Expired by an operator."),
    }
    page = unescape(operator.get(detail_url(by_button)).content.decode())
    assert "Operator actions" in page and "Marked cancelled from the admin. by alice.ops@corp.example" in " ".join(
        page.split("Operator actions")[1].replace("<strong>", "").replace("</strong>", "").split()
    )
    assert "Operator actions" not in operator.get(detail_url(make_call("echo", "completed"))).content.decode()


@pytest.mark.django_db
def test_expire_action_from_the_changelist_is_logged(operator: Client) -> None:
    live = make_call("deploy", "working")
    done = make_call("echo", "completed")
    response = operator.post(reverse(CHANGELIST), {"action": "expire_calls", "_selected_action": [str(live.pk), str(done.pk)]})
    assert response.status_code == 302
    assert ToolCall.objects.get(pk=live.pk).status == "expired"
    assert ToolCall.objects.get(pk=done.pk).status == "completed"
    assert list(LogEntry.objects.values_list("object_id", flat=True)) == [str(live.pk)]


@pytest.mark.django_db
def test_a_finished_call_cannot_be_cancelled_from_its_page(operator: Client) -> None:
    done = make_call("echo", "completed")
    operator.post(act_url(done, "cancel"))
    done.refresh_from_db()
    assert done.status == "completed" and not LogEntry.objects.exists()


@pytest.mark.django_db
def test_action_buttons_need_post_and_a_known_action(operator: Client) -> None:
    call = make_call()
    assert operator.get(act_url(call, "cancel")).status_code == 405
    assert operator.post(act_url(call, "explode")).status_code == 403
    call.refresh_from_db()
    assert call.status == "input_required"


@pytest.mark.django_db
def test_retry_starts_a_failed_background_call_again_as_a_new_call(operator: Client) -> None:
    failed_bg = make_call("slow_count", "failed", background=True, arguments={"n": 3})
    failed_fg = make_call("deploy", "failed")
    assert 'id="mcp-retry"' in operator.get(detail_url(failed_bg)).content.decode()
    assert 'id="mcp-retry"' not in operator.get(detail_url(failed_fg)).content.decode()
    operator.post(reverse(CHANGELIST) + "?state=all",
                  {"action": "retry_calls", "_selected_action": [str(failed_bg.pk), str(failed_fg.pk)]})
    retried = ToolCall.objects.exclude(pk__in=[failed_bg.pk, failed_fg.pk]).get()
    assert (retried.tool_name, retried.arguments, retried.status, retried.background) == ("slow_count", {"n": 3}, "working", True)
    assert ToolCall.objects.get(pk=failed_bg.pk).status == "failed", "the failed call stays as it ended"
    entry = LogEntry.objects.get()
    assert entry.object_id == str(failed_bg.pk) and str(retried.pk) in entry.get_change_message()


@pytest.mark.django_db
def test_retry_is_hidden_without_a_retry_api(operator: Client, monkeypatch: pytest.MonkeyPatch) -> None:
    import mcp_tools.tasks

    monkeypatch.delattr(mcp_tools.tasks, "retry_call")
    failed_bg = make_call("crunch", "failed", background=True)
    assert "retry_calls" not in operator.get(reverse(CHANGELIST), {"state": "all"}).content.decode()
    assert 'id="mcp-retry"' not in operator.get(detail_url(failed_bg)).content.decode()
    assert operator.post(act_url(failed_bg, "retry")).status_code == 403
    assert ToolCall.objects.count() == 1


# -- permissions --------------------------------------------------------------------------------


def _pages(call: ToolCall) -> list[str]:
    return [reverse(CHANGELIST), detail_url(call), reverse(DASHBOARD), reverse(DATA)]


@pytest.mark.django_db
def test_non_staff_are_sent_to_the_login_page(client: Client) -> None:
    call = make_call()
    client.force_login(make_user("customer", staff=False, perms=("view_toolcall", "change_toolcall")))
    for url in _pages(call):
        response = client.get(url)
        assert response.status_code == 302 and "/admin/login/" in response["Location"], url
    assert client.post(act_url(call, "cancel")).status_code == 302
    call.refresh_from_db()
    assert call.status == "input_required"


@pytest.mark.django_db
def test_staff_without_the_permission_see_nothing() -> None:
    call = make_call()
    client = client_for(make_user("intern"))
    for url in _pages(call):
        assert client.get(url).status_code == 403, url
    assert client.post(act_url(call, "cancel")).status_code == 403
    call.refresh_from_db()
    assert call.status == "input_required"


@pytest.mark.django_db
def test_view_only_staff_can_look_but_not_act(viewer: Client) -> None:
    call = make_call()
    for url in _pages(call):
        assert viewer.get(url).status_code == 200, url
    changelist = viewer.get(reverse(CHANGELIST)).content.decode()
    assert "cancel_calls" not in changelist and "expire_calls" not in changelist
    assert 'id="mcp-cancel"' not in viewer.get(detail_url(call)).content.decode()
    assert viewer.post(act_url(call, "cancel")).status_code == 403
    viewer.post(reverse(CHANGELIST), {"action": "cancel_calls", "_selected_action": [str(call.pk)]})
    call.refresh_from_db()
    assert call.status == "input_required" and not LogEntry.objects.exists()


# -- signals ------------------------------------------------------------------------------------


async def explode() -> str:
    """Always fails."""
    raise RuntimeError("kaput")


@pytest.mark.django_db(transaction=True)
async def test_signals_tell_a_project_about_calls_that_have_rows(settings: Any) -> None:
    from demo_site.asgi import application
    from mcp_tools import signals

    heard: list[tuple[str, str, str]] = []

    def listener(name: str) -> Any:
        def receive(sender: Any, *, call_id: str, tool_name: str, status: str, principal: str, flavor: str, **kwargs: Any) -> None:
            assert sender is ToolCall and principal == "anonymous" and flavor == "mrtr"
            heard.append((name, tool_name, status))
        return receive

    receivers = {name: listener(name) for name in ("started", "suspended", "finished", "failed")}
    for name, receiver in receivers.items():
        getattr(signals, f"tool_call_{name}").connect(receiver)
    try:
        await call_modern(application, "tools/call", {"name": "echo", "arguments": {"text": "hi"}})
        assert heard == [], "a fast call without a row sends nothing"
        with override_settings(MCP_TOOLS={**settings.MCP_TOOLS, "RECORD_ALL_CALLS": True}):
            await call_modern(application, "tools/call", {"name": "echo", "arguments": {"text": "hi"}})
            with registry.registered_temporarily(make_tool(explode)):
                await call_modern(application, "tools/call", {"name": "explode", "arguments": {}})
        await call_modern(application, "tools/call", {"name": "deploy", "arguments": {"service": "api"}})
    finally:
        for name, receiver in receivers.items():
            getattr(signals, f"tool_call_{name}").disconnect(receiver)
    assert heard == [
        ("started", "echo", "working"), ("finished", "echo", "completed"),
        ("started", "explode", "working"), ("failed", "explode", "failed"),
        ("started", "deploy", "input_required"), ("suspended", "deploy", "input_required"),
    ]


@pytest.mark.django_db(transaction=True)
async def test_a_failing_receiver_does_not_fail_the_call(settings: Any) -> None:
    from demo_site.asgi import application
    from mcp_tools.signals import tool_call_finished

    def broken(sender: Any, **kwargs: Any) -> None:
        raise ValueError("metrics are down")

    tool_call_finished.connect(broken)
    try:
        with override_settings(MCP_TOOLS={**settings.MCP_TOOLS, "RECORD_ALL_CALLS": True}):
            response = await call_modern(application, "tools/call", {"name": "echo", "arguments": {"text": "hi"}})
    finally:
        tool_call_finished.disconnect(broken)
    assert response.json()["result"]["content"] == [{"type": "text", "text": "hi"}]
    assert await sync_to_async(lambda: list(ToolCall.objects.values_list("status", flat=True)))() == ["completed"]


# -- the live WebSocket -------------------------------------------------------------------------


def _session_cookie(user: Any) -> bytes:
    client = Client()
    client.force_login(user)
    return f"sessionid={client.cookies['sessionid'].value}".encode()


async def _communicator(cookie: bytes | None, origin: bytes = b"http://testserver") -> Any:
    from channels.testing import WebsocketCommunicator

    from mcp_tools.routing import console_websocket_app

    headers = [(b"origin", origin), (b"host", b"testserver")]
    if cookie is not None:
        headers.append((b"cookie", cookie))
    return WebsocketCommunicator(console_websocket_app(), "/mcp-tools/console/ws/", headers=headers)


@pytest.mark.django_db(transaction=True)
async def test_websocket_refuses_anonymous_non_staff_and_foreign_origins() -> None:
    anonymous = await _communicator(None)
    connected, code = await anonymous.connect()
    assert not connected and code == 4403
    customer = await sync_to_async(make_user)("customer", staff=False, perms=("view_toolcall",))
    outsider = await _communicator(await sync_to_async(_session_cookie)(customer))
    connected, code = await outsider.connect()
    assert not connected and code == 4403
    viewer = await sync_to_async(make_user)("viewer", perms=("view_toolcall",))
    foreign = await _communicator(await sync_to_async(_session_cookie)(viewer), origin=b"http://evil.example")
    connected, _ = await foreign.connect()
    assert not connected, "a page of another site may not open the console with the admin's cookie"


@pytest.mark.parametrize("path", ["/anything", "/", "/mcp-tools/console/ws/more/", "/mcp"])
async def test_websocket_to_another_path_is_refused_at_the_handshake(path: str, caplog: pytest.LogCaptureFixture) -> None:
    """Channels' bare ``URLRouter`` raised ``ValueError: No route found`` for it: HTTP 500 and a traceback logged."""
    from channels.testing import WebsocketCommunicator

    from mcp_tools.routing import console_websocket_app

    socket = WebsocketCommunicator(console_websocket_app(), path, headers=[(b"origin", b"http://testserver"), (b"host", b"testserver")])
    connected, _ = await socket.connect(timeout=5)
    assert not connected
    assert not [r for r in caplog.records if r.levelno >= 40], caplog.text


@pytest.mark.django_db(transaction=True)
async def test_websocket_pushes_the_dashboard_when_the_admin_cancels_a_call() -> None:
    viewer = await sync_to_async(make_user)("viewer", perms=("view_toolcall",))
    call = await sync_to_async(make_call)("deploy", "input_required")
    socket = await _communicator(await sync_to_async(_session_cookie)(viewer))
    connected, _ = await socket.connect()
    assert connected
    first = await socket.receive_json_from(timeout=5)
    assert first["type"] == "dashboard" and "deploy" in first["html"] and "Input required" in first["html"]

    def cancel_from_the_admin() -> int:
        operator = client_for(make_user("operator", perms=("view_toolcall", "change_toolcall")))
        return operator.post(act_url(call, "cancel")).status_code

    assert await sync_to_async(cancel_from_the_admin)() == 302
    pushed = await socket.receive_json_from(timeout=5)
    assert pushed["fingerprint"] != first["fingerprint"]
    oldest = pushed["html"].split('id="mcp-oldest"')[1].split("</section>")[0]
    assert "deploy" not in oldest, "the cancelled call left the calls in flight"
    await socket.disconnect()


@pytest.mark.django_db(transaction=True)
async def test_websocket_notices_changes_nobody_announced() -> None:
    """Progress reports and other processes' changes send no message; the console's tick finds them."""
    viewer = await sync_to_async(make_user)("viewer", perms=("view_toolcall",))
    call = await sync_to_async(make_call)("slow_count", "working")
    socket = await _communicator(await sync_to_async(_session_cookie)(viewer))
    assert (await socket.connect())[0]
    await socket.receive_json_from(timeout=5)
    await store.record_progress(call.pk, 7, 10, "step 7")  # what a handler's progress does
    pushed = await socket.receive_json_from(timeout=5)
    assert "70%" in pushed["html"]
    await socket.disconnect()


def _tickers() -> list[asyncio.Task[Any]]:
    """The consoles' tickers still running in this loop."""
    return [t for t in asyncio.all_tasks() if not t.done() and "ConsoleConsumer.watch" in repr(t.get_coro())]


async def _group_size() -> int:
    """How many channels the consoles' group holds, in the in-memory or the Redis channel layer."""
    from channels.layers import get_channel_layer

    from mcp_tools.interprocess.events import CONSOLE_GROUP

    layer: Any = get_channel_layer()
    if hasattr(layer, "groups"):  # InMemoryChannelLayer
        return len(layer.groups.get(CONSOLE_GROUP, {}))
    key = layer._group_key(CONSOLE_GROUP)  # channels_redis: a sorted set per group
    async with layer.connection(layer.consistent_hash(CONSOLE_GROUP)) as connection:
        return int(await connection.zcard(key))


@pytest.mark.django_db(transaction=True)
async def test_websocket_ignores_frames_that_are_not_json_text() -> None:
    """A binary frame or text that is not JSON is ignored: the console stays open and still answers a refresh."""
    viewer = await sync_to_async(make_user)("viewer", perms=("view_toolcall",))
    socket = await _communicator(await sync_to_async(_session_cookie)(viewer))
    assert (await socket.connect())[0]
    first = await socket.receive_json_from(timeout=5)
    for frame in ({"text": "not json"}, {"text": "{"}, {"text": ""}, {"text": "[" * 100_000}, {"bytes": b"\x00\x01"}):
        await socket.send_input({"type": "websocket.receive", **frame})
    await socket.send_json_to({"type": "refresh"})
    again = await socket.receive_json_from(timeout=5)
    assert again["type"] == "dashboard" and again["fingerprint"] == first["fingerprint"]
    assert not socket.future.done()
    await socket.disconnect()
    assert not _tickers()


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("ending", ["exception", "cancelled"])
async def test_a_console_that_ends_without_a_disconnect_stops_its_ticker_and_leaves_the_group(ending: str) -> None:
    """Channels calls disconnect() only for a client's disconnect: a consumer that raises, or that the
    server cancels, must not leave its ticker querying the database every second, for good."""
    from channels.layers import get_channel_layer

    from mcp_tools.interprocess.events import CONSOLE_GROUP

    viewer = await sync_to_async(make_user)("viewer", perms=("view_toolcall",))
    members = await _group_size()
    socket = await _communicator(await sync_to_async(_session_cookie)(viewer))
    assert (await socket.connect())[0]
    await socket.receive_json_from(timeout=5)
    assert len(_tickers()) == 1 and await _group_size() == members + 1
    if ending == "exception":
        # A group message the consumer has no handler for: Channels raises out of the consumer.
        await get_channel_layer().group_send(CONSOLE_GROUP, {"type": "no.such.handler"})
    else:
        socket.future.cancel()  # what a server does to a connection's application on shutdown
    await asyncio.wait([socket.future], timeout=5)
    assert socket.future.done()
    leaked = _tickers()
    for task in leaked:
        task.cancel()
    assert not leaked, "the ended console's ticker is still running"
    assert await _group_size() == members, "the ended console is still in the group"



@pytest.mark.django_db(transaction=True)
async def test_a_console_whose_ticker_fails_closes_its_socket(monkeypatch: pytest.MonkeyPatch) -> None:
    """A tick that raises (the database went away) ended the ticker and left the socket open: the page
    said "live" over a dashboard that no longer moved. Now the socket is closed (1011), and the page
    polls instead (console.js), saying "offline" while that fails too."""
    from django.db import OperationalError

    from mcp_tools.console import consumers

    viewer = await sync_to_async(make_user)("viewer", perms=("view_toolcall",))
    socket = await _communicator(await sync_to_async(_session_cookie)(viewer))
    assert (await socket.connect())[0]
    await socket.receive_json_from(timeout=5)

    def database_gone() -> str:
        raise OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(consumers, "_fingerprint", database_gone)
    monkeypatch.setattr(consumers, "TICK_SECONDS", 0.05)
    closed = await socket.receive_output(timeout=5)
    assert closed == {"type": "websocket.close", "code": consumers.TICKER_FAILED}, closed
    await socket.disconnect()
    assert not _tickers()


def _served_as_column(operator: Client, flavor: str) -> dict[str, str]:
    """``{call id: "served as" cell}`` of the changelist filtered on ``flavor`` (every status)."""
    response = operator.get(reverse(CHANGELIST), {"flavor": flavor, "state": "all"})
    assert response.status_code == 200
    admin = response.context["cl"].model_admin
    return {str(call.pk): admin.served(call) for call in shown(response)}


@pytest.mark.django_db(transaction=True)
async def test_a_2026_task_is_listed_and_filtered_as_a_task(monkeypatch: pytest.MonkeyPatch) -> None:
    """A call a 2026-07-28 client made through the tasks extension (answered ``resultType: "task"``)
    is a task in the console, as a 2025-11-25 task is: "Served as: Task" lists both, and the
    multi-round-trip filter, which lists a 2026 call held on a worker, leaves it out."""
    from demo_site.asgi import application
    from mcp_tools.server import background

    monkeypatch.setattr(background, "send", lambda call_id, tool, task_id: None)  # no broker: the task stays queued
    tasks = {"extensions": {"io.modelcontextprotocol/tasks": {}}}
    response = await call_modern(application, "tools/call", {"name": "slow_compute", "arguments": {"seconds": 30}},
                                 capabilities=tasks)
    created = json.loads(response.body)["result"]
    assert created["resultType"] == "task", created
    task_id = created["taskId"]
    got = await call_modern(application, "tasks/get", {"taskId": task_id}, capabilities=tasks, headers={"mcp-name": task_id})
    assert json.loads(got.body)["result"]["status"] == "working"
    legacy = await sync_to_async(make_call)("slow_compute", "working", steps=0, flavor="task", background=True, method="tools/call")
    held = await sync_to_async(make_call)("slow_compute", "working", steps=0, background=True, method="tools/call")
    operator = await sync_to_async(client_for)(await sync_to_async(make_user)("operator", perms=("view_toolcall",)))

    as_task = await sync_to_async(_served_as_column)(operator, "task")
    assert as_task == {task_id: "Task · background", str(legacy.pk): "Task · background"}
    assert await sync_to_async(_served_as_column)(operator, "mrtr") == {str(held.pk): "2026-07-28 multi-round-trip · background"}
    page = unescape((await sync_to_async(operator.get)(reverse("admin:mcp_tools_toolcall_change", args=[task_id]))).content.decode())
    assert "Task · 2026-07-28 · background" in " ".join(page.split()), page
