"""``python manage.py mcp_call TOOL --arg k=v``: call a tool in process, from the terminal.

The call goes through the same method table as the HTTP endpoint (``tools/list``,
``tools/call`` of the 2026-07-28 era), as a given user, with no server and no client.
When the tool asks something, the operator answers on the terminal: each field of an
elicitation form is prompted with its type, choices and default, and a sampling
request shows the conversation and takes the "model's" reply as typed text. A
paged result (``nextResumeToken``) is followed to its last page, each page printed
as it comes (``--max-pages`` stops sooner). Useful for trying and debugging tools::

    python manage.py mcp_call echo --arg text=hello --user admin
    python manage.py mcp_call deploy --arg service=api --user admin
    python manage.py mcp_call --list --user viewer

``python manage.py mcp_tools list|call`` is the same with subcommands.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO, TypeVar

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser, OutputWrapper
from django.utils import timezone

from mcp_tools.protocol import jsonrpc
from mcp_tools.protocol.errors import INVALID_PARAMS
from mcp_tools.protocol.answers import check_field
from mcp_tools.registry import registry

#: What the terminal "client" can answer: forms and URLs, the operator as the model
#: (tool use included), and the working directory as its root.
CAPABILITIES: dict[str, Any] = {"elicitation": {"form": {}, "url": {}}, "sampling": {"tools": {}}, "roots": {}}
ACTIONS = {"a": "accept", "accept": "accept", "d": "decline", "decline": "decline", "c": "cancel", "cancel": "cancel"}
YES = {"y", "yes", "true", "1", "on"}
NO = {"n", "no", "false", "0", "off"}
_request_ids = itertools.count(1)
#: Seconds a call may go without progress before the command looks whether it sits queued for a Celery
#: worker nobody runs, and says so (once; it keeps waiting).
WORKER_NOTE_SECONDS = 5.0


# -- the operator on the terminal ---------------------------------------------------------


class TerminalAnswerer:
    """Answers a tool's input requests (elicitation, sampling, roots) by asking the operator."""

    def __init__(self, stdin: TextIO, out: OutputWrapper, *, interactive: bool = True) -> None:
        self.stdin = stdin
        self.out = out
        self.interactive = interactive
        self._tool_use_ids = itertools.count(1)

    def answer(self, key: str, request: dict[str, Any]) -> Any:
        """The client's result for one input request ``{"method", "params"}``."""
        method = request.get("method")
        params = request.get("params") or {}
        if method == "roots/list":
            # No question to ask: the operator's working directory is the terminal's root.
            cwd = Path.cwd()
            return {"roots": [{"uri": cwd.as_uri(), "name": cwd.name or str(cwd)}]}
        if not self.interactive:
            raise CommandError(f"The tool asked for input ({method}) and --no-input was given")
        if method == "elicitation/create":
            if params.get("mode") == "url":
                return self.url_elicitation(params)
            return self.form_elicitation(params)
        if method == "sampling/createMessage":
            return self.sampling(params)
        raise CommandError(f"The tool sent a request this command cannot answer: {method}")

    # -- prompting --
    def ask(self, prompt: str) -> str:
        """One line typed by the operator (without its newline); a closed stdin is an error."""
        self.out.write(prompt, ending="")
        self.out.flush()
        line = self.stdin.readline()
        if not line:
            self.out.write("\n", ending="")
            raise CommandError("The tool asked for input but stdin is closed (not a terminal?); "
                           "run the command interactively, or pass --no-input to fail at once")
        return line.rstrip("\r\n")

    def choose_action(self) -> str:
        while True:
            typed = self.ask("Accept, decline or cancel? [accept]: ").strip().lower() or "accept"
            if typed in ACTIONS:
                return ACTIONS[typed]
            self.out.write("  Type accept, decline or cancel (a/d/c).\n", ending="")

    def form_elicitation(self, params: dict[str, Any]) -> dict[str, Any]:
        schema = params.get("requestedSchema") or {}
        properties: dict[str, Any] = schema.get("properties") or {}
        required = set(schema.get("required") or [])
        self.out.write(f"\nThe tool asks: {params.get('message', '')}\n", ending="")
        action = self.choose_action()
        if action != "accept":
            return {"action": action}
        content: dict[str, Any] = {}
        for name, prop in properties.items():
            value = self.ask_field(name, prop if isinstance(prop, dict) else {}, name in required)
            if value is not _SKIP:
                content[name] = value
        return {"action": "accept", "content": content}

    def ask_field(self, name: str, prop: dict[str, Any], required: bool) -> Any:
        """Prompt one form field until the typed text fits its schema (empty: default or skip).

        A value is held to the whole field schema (lengths, patterns, formats, ranges, item
        counts) by the check the server gives the answer, so what it would refuse is asked again.
        """
        choices = field_choices(prop)
        kind = prop.get("type", "string")
        label = prop.get("title") or name
        hints: list[str] = []
        if prop.get("description"):
            hints.append(str(prop["description"]))
        if choices:
            listed = ", ".join(value if title == value else f"{value} ({title})" for value, title in choices)
            hints.append(("several of, comma-separated: " if kind == "array" else "one of: ") + listed)
        elif kind == "boolean":
            hints.append("yes/no")
        elif kind in ("integer", "number"):
            bounds = [f"{word} {prop[key]}" for key, word in (("minimum", "min"), ("maximum", "max")) if key in prop]
            hints.append(kind + (f", {', '.join(bounds)}" if bounds else ""))
        elif prop.get("format"):
            hints.append(str(prop["format"]))
        has_default = "default" in prop
        if has_default:
            default = prop["default"]
            shown = ("yes" if default else "no") if kind == "boolean" else ",".join(default) if isinstance(default, list) else default
            hints.append(f"default: {shown}")
        elif required:
            hints.append("required")
        prompt = f"  {label}" + (f" ({'; '.join(hints)})" if hints else "") + ": "
        while True:
            typed = self.ask(prompt).strip()
            if not typed:
                if has_default:
                    return prop["default"]
                if not required:
                    return _SKIP
                self.out.write("  This field is required.\n", ending="")
                continue
            try:
                value = parse_field(typed, prop, choices)
                check_field(name, value, prop)  # an InvalidAnswer is a ValueError
            except ValueError as exc:
                self.out.write(f"  {exc}\n", ending="")
                continue
            return value

    def url_elicitation(self, params: dict[str, Any]) -> dict[str, Any]:
        self.out.write(f"\nThe tool asks: {params.get('message', '')}\n  Open: {params.get('url', '')}\n", ending="")
        return {"action": self.choose_action()}

    def sampling(self, params: dict[str, Any]) -> dict[str, Any]:
        self.out.write("\nThe tool asks the model (you answer as the model):\n", ending="")
        if params.get("systemPrompt"):
            self.out.write(f"  [system] {params['systemPrompt']}\n", ending="")
        for message in params.get("messages") or []:
            self.out.write(f"  [{message.get('role', '?')}] {describe_content(message.get('content'))}\n", ending="")
        tools = params.get("tools") or []
        if tools:
            self.out.write("  Tools the model may call (reply '/tool NAME {json arguments}' to call one):\n", ending="")
            for tool in tools:
                self.out.write(f"    {tool.get('name')}: {first_line(tool.get('description'))}\n", ending="")
        while True:
            reply = self.ask("Model reply: ")
            if tools and reply.startswith("/tool"):
                try:
                    return self.tool_use(reply[len("/tool"):].strip(), {tool.get("name") for tool in tools})
                except ValueError as exc:
                    self.out.write(f"  {exc}\n", ending="")
                    continue
            if reply.strip():
                return {"role": "assistant", "content": {"type": "text", "text": reply}, "model": "operator", "stopReason": "endTurn"}
            self.out.write("  Type the model's reply.\n", ending="")

    def tool_use(self, typed: str, names: set[Any]) -> dict[str, Any]:
        name, _, raw = typed.partition(" ")
        if name not in names:
            raise ValueError(f"Not one of the offered tools: {name!r}")
        try:
            arguments = json.loads(raw) if raw.strip() else {}
        except json.JSONDecodeError as exc:
            raise ValueError(f"The arguments are not JSON: {exc.msg}") from None
        if not isinstance(arguments, dict):
            raise ValueError("The arguments must be a JSON object")
        use = {"type": "tool_use", "id": f"operator-{next(self._tool_use_ids)}", "name": name, "input": arguments}
        return {"role": "assistant", "content": [use], "model": "operator", "stopReason": "toolUse"}


class _Skip:
    """An optional form field left empty (not sent)."""


_SKIP = _Skip()


def field_choices(prop: dict[str, Any]) -> list[tuple[Any, str]]:
    """``(value, title)`` pairs of an enum field (plain, titled ``oneOf``/``anyOf``, or an array's items)."""
    items = prop.get("items")
    source: dict[str, Any] = items if prop.get("type") == "array" and isinstance(items, dict) else prop
    if "enum" in source:
        names = source.get("enumNames") or []
        return [(value, str(names[i]) if i < len(names) else str(value)) for i, value in enumerate(source["enum"])]
    for key in ("oneOf", "anyOf"):
        if isinstance(source.get(key), list):
            return [(item["const"], str(item.get("title", item["const"]))) for item in source[key] if isinstance(item, dict) and "const" in item]
    return []


def parse_field(typed: str, prop: dict[str, Any], choices: list[tuple[Any, str]]) -> Any:
    """The value of one typed form field, of the field's type; ``ValueError`` says why the text
    is none (the field's other constraints are :func:`~mcp_tools.protocol.answers.check_field`'s)."""
    kind = prop.get("type", "string")

    def pick(text: str) -> Any:
        for value, title in choices:
            if text in (str(value), title):
                return value
        if text.isdigit() and 1 <= int(text) <= len(choices):
            return choices[int(text) - 1][0]
        raise ValueError(f"Not one of: {', '.join(str(value) for value, _ in choices)}")

    if kind == "array":
        return [pick(part.strip()) for part in typed.split(",") if part.strip()]
    if choices:
        return pick(typed)
    if kind == "boolean":
        if typed.lower() in YES:
            return True
        if typed.lower() in NO:
            return False
        raise ValueError("Type yes or no")
    if kind in ("integer", "number"):
        try:
            return int(typed) if kind == "integer" else float(typed)
        except ValueError:
            raise ValueError(f"Not {'an integer' if kind == 'integer' else 'a number'}: {typed!r}") from None
    return typed


def describe_content(content: Any) -> str:
    blocks = content if isinstance(content, list) else [content]
    parts = []
    for block in blocks:
        if isinstance(block, dict) and block.get("type") == "text":
            parts.append(str(block.get("text", "")))
        elif isinstance(block, dict) and block.get("type") == "tool_result":
            parts.append(f"(tool result {block.get('toolUseId', '')}: {describe_content(block.get('content'))})")
        else:
            parts.append(json.dumps(block, default=str))
    return " ".join(parts)


def first_line(text: Any) -> str:
    return str(text or "").strip().splitlines()[0] if str(text or "").strip() else ""


# -- the call, in process -----------------------------------------------------------------


def principal_for(username: str | None) -> Any:
    """The caller: ``username``, else ``MCP_TOOLS['STDIO_USER']``, else anonymous when allowed."""
    from mcp_tools.conf import mcp_settings
    from mcp_tools.server.auth import ANONYMOUS, principal_for_user

    name = username or mcp_settings.STDIO_USER
    if name:
        User = get_user_model()
        try:
            user = User._default_manager.get_by_natural_key(name)
        except User.DoesNotExist:
            raise CommandError(f"No user named {name!r}") from None
        if not user.is_active:
            raise CommandError(f"User {name!r} is inactive")
        return principal_for_user(user)
    if mcp_settings.ALLOW_ANONYMOUS:
        return ANONYMOUS
    raise CommandError("Pass --user USERNAME (or set MCP_TOOLS['STDIO_USER']), or enable ALLOW_ANONYMOUS")


class InProcessCaller:
    """``tools/list`` and ``tools/call`` through the server's method table, as one principal."""

    def __init__(self, principal: Any, answerer: TerminalAnswerer, notices: OutputWrapper, max_rounds: int = 50,
                 worker_note_seconds: float | None = None) -> None:
        self.principal = principal
        self.answerer = answerer
        self.notices = notices
        self.max_rounds = max_rounds
        self.worker_note_seconds = WORKER_NOTE_SECONDS if worker_note_seconds is None else worker_note_seconds
        #: When the call was last heard of (a round started, a notification came): see :meth:`tell_if_queued`.
        self.last_heard = time.monotonic()
        #: Whether the operator was told the call waits for a Celery worker (once a command).
        self.told_queued = False
        #: When the command started: the calls it makes are made since (a later page's too).
        self.since = timezone.now()
        #: The ``requestState`` of the round a call waits at while the operator is asked;
        #: None when no call waits. This command is the call's only client: if it stops
        #: there, :meth:`give_up` ends the call instead of leaving it waiting for CALL_TTL.
        self.waiting_state: Any = None

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        from mcp_tools.protocol import versions
        from mcp_tools.protocol.errors import McpError
        from mcp_tools.server import RequestContext, dispatch

        request_id = next(_request_ids)
        rc = RequestContext(
            principal=self.principal, protocol_version=versions.LATEST_MODERN, modern=True,
            client_capabilities=CAPABILITIES, request_id=request_id, log_level="info",
            progress_token=f"mcp_call-{request_id}", emit=self.notice,
        )
        try:
            return await dispatch(method, params, rc)
        except McpError as exc:
            key = exc.data.get("key") if isinstance(exc.data, dict) else None
            if exc.code == INVALID_PARAMS and isinstance(key, str) and "inputResponses" in params and key in params["inputResponses"]:
                raise RefusedAnswer(key, exc.message) from None
            raise CommandError(f"{exc.message} ({exc.code}){format_error_data(exc.data)}") from None

    async def notice(self, message: dict[str, Any]) -> None:
        """Progress and log notifications of the running tool, on stderr."""
        self.last_heard = time.monotonic()
        params = message.get("params") or {}
        plain = str  # not the stderr wrapper's error style: these are no errors
        if message.get("method") == "notifications/progress":
            total = f"/{params['total']}" if params.get("total") is not None else ""
            text = f" {params['message']}" if params.get("message") else ""
            self.notices.write(f"[progress {params.get('progress')}{total}]{text}\n", plain, ending="")
        elif message.get("method") == "notifications/message":
            self.notices.write(f"[{params.get('level', 'info')}] {params.get('data')}\n", plain, ending="")

    async def list_tools(self) -> list[dict[str, Any]]:
        tools: list[dict[str, Any]] = []
        params: dict[str, Any] = {}
        while True:
            page = await self.request("tools/list", params)
            tools.extend(page.get("tools", []))
            if not page.get("nextCursor"):
                return tools
            params = {"cursor": page["nextCursor"]}

    async def call_tool(self, name: str, arguments: dict[str, Any], resume_token: str | None = None) -> dict[str, Any]:
        """One ``tools/call`` answered to its end (the operator answers what it asks); ``resume_token``
        asks for the page a result's ``nextResumeToken`` names."""
        call: dict[str, Any] = {"name": name, "arguments": arguments}
        if resume_token is not None:
            call["resumeToken"] = resume_token
        params = call
        asked: dict[str, Any] = {}
        responses: dict[str, Any] = {}
        for _ in range(self.max_rounds):
            self.last_heard = time.monotonic()
            watcher = asyncio.ensure_future(self.tell_if_queued(name))
            try:
                result = await self.request("tools/call", params)
            except RefusedAnswer as refused:
                # The round keeps waiting (2026-07-28): the question is asked again, as one the form's
                # own checks refused is (a model's pattern is not in the form the command reads).
                self.answerer.out.write(f"  The tool refused that answer: {refused.message}\n", ending="")
                request = asked[refused.key]
                responses = {**responses, refused.key: await in_prompt_thread(self.answerer.answer, refused.key, request)}
                params = {**call, "inputResponses": responses, "requestState": self.waiting_state}
                continue
            finally:
                watcher.cancel()
            if result.get("resultType") != "input_required":
                self.waiting_state = None
                return result
            self.waiting_state = result.get("requestState")
            asked = result["inputRequests"]
            responses = {key: await in_prompt_thread(self.answerer.answer, key, request) for key, request in asked.items()}
            params = {**call, "inputResponses": responses, "requestState": result.get("requestState")}
        raise CommandError(f"{name} still asked for input after {self.max_rounds} rounds")

    async def tell_if_queued(self, name: str) -> None:
        """Once the call has gone ``worker_note_seconds`` without progress, and whenever it goes that long
        again, look whether it sits queued for a Celery worker (a handler that awaited ``ctx.defer()``, a
        background tool): then say so on stderr, with how to start a worker, once; the wait goes on.
        With no worker consuming the queue the command waited in silence until the call expired."""
        from mcp_tools import store

        while not self.told_queued:
            left = self.last_heard + self.worker_note_seconds - time.monotonic()
            if left > 0:
                await asyncio.sleep(left)
                continue
            try:
                queued = await store.db(store.sync_calls.queued_for_a_worker)(self.principal.id, name, self.since)
            except Exception:  # noqa: BLE001 - a note not given; the call's own request reports the database
                return
            if queued:
                self.told_queued = True
                self.notices.write(f"({name} waits for a Celery worker: none has taken the call yet. Start one beside the server, "
                                   f"e.g. {worker_command(name)} (docs/background.md); Ctrl-C cancels the call)\n", str, ending="")
                return
            self.last_heard = time.monotonic()  # not queued (it runs here, or a worker has it): look again later

    def give_up(self, reason: str) -> None:
        """End the call left waiting for input (cancelled), if there is one; sync code, after the loop."""
        from mcp_tools.server import core

        state, self.waiting_state = self.waiting_state, None
        if state is not None:
            core.abandon_sync(state, self.principal, f"mcp_call stopped while the tool waited for input: {reason}")


def worker_command(name: str) -> str:
    """The command that starts a worker for tool ``name``'s queue: ``celery -A <the Celery app> worker [-Q <queue>]``."""
    try:
        from celery import current_app

        project = current_app.main or "yourproject"
    except ImportError:
        project = "yourproject"
    tool = registry.get_tool(name)
    return f"celery -A {project} worker" + (f" -Q {tool.queue}" if tool is not None and tool.queue else "")


def format_error_data(data: Any) -> str:
    """The useful part of an error's ``data`` (argument errors field by field)."""
    if isinstance(data, dict) and isinstance(data.get("errors"), list):
        return "".join(f"\n  {e.get('field') or '(arguments)'}: {e.get('message')}" for e in data["errors"] if isinstance(e, dict))
    if data is None:
        return ""
    return f"\n  {json.dumps(data, default=str)}"


def value_types(schema: Any) -> set[str]:
    """The JSON types a field's schema lets through: its ``type``, else the types of its ``enum`` or
    ``const`` values, and those of its ``anyOf`` / ``oneOf`` branches (``str | None`` is
    ``anyOf [string, null]``); empty when the schema says nothing of types."""
    if not isinstance(schema, dict):
        return set()
    declared = schema.get("type")
    types = {declared} if isinstance(declared, str) else {str(kind) for kind in declared} if isinstance(declared, list) else set()
    if not types:
        values = [*(schema.get("enum") or []), *([schema["const"]] if "const" in schema else [])]
        types = {"string" if isinstance(value, str) else "null" if value is None else "other" for value in values}
    for key in ("anyOf", "oneOf"):
        for branch in schema.get(key) or []:
            types |= value_types(branch)
    return types


def takes_text(schema: Any) -> bool:
    """Whether a field takes only text (a string or a choice of strings, optional or not)."""
    types = value_types(schema)
    return "string" in types and types <= {"string", "null"}


def parse_arguments(pairs: list[str], json_args: str | None, schema: dict[str, Any] | None) -> dict[str, Any]:
    """Tool arguments from ``--json-args`` then ``--arg k=v`` (a value is JSON unless the field takes
    only text, :func:`takes_text`: ``note=123`` is the text ``"123"`` for a ``str | None`` field)."""
    arguments: dict[str, Any] = {}
    # Read as the wire reads JSON: NaN, Infinity and 1e400 are no JSON numbers (json.loads took them, and a
    # call that writes a row failed with the database's IntegrityError traceback).
    if json_args:
        try:
            loaded = jsonrpc.loads_text(json_args)
        except json.JSONDecodeError as exc:
            raise CommandError(f"--json-args is not valid JSON: {exc.msg} (at character {exc.pos})") from None
        except ValueError as exc:
            raise CommandError(f"--json-args is not valid JSON: {exc}") from None
        if not isinstance(loaded, dict):
            raise CommandError("--json-args must be a JSON object")
        arguments.update(loaded)
    properties = (schema or {}).get("properties") or {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise CommandError(f"--arg takes KEY=VALUE, got {pair!r}")
        prop = properties.get(key)
        if not isinstance(prop, dict) or takes_text(prop):
            # A text field (or a name the schema does not know): the text as typed.
            arguments[key] = raw
            continue
        try:
            arguments[key] = jsonrpc.loads_text(raw)
        except ValueError:  # not JSON (or NaN, Infinity): the text, and the server says what is wrong with it
            arguments[key] = raw
    if jsonrpc.unstorable_string(arguments) is not None:
        # Bytes that are not UTF-8 in argv arrive as lone surrogates (Python's surrogateescape).
        raise CommandError("An argument holds U+0000 or text that is not UTF-8, which no call can store")
    return arguments


def format_result(result: dict[str, Any]) -> str:
    """What a tool returned: its structured content as JSON, else its text blocks."""
    if result.get("structuredContent") is not None:
        return json.dumps(result["structuredContent"], indent=2, ensure_ascii=False, default=str)
    return describe_content(result.get("content") or [])


def tool_table(tools: list[dict[str, Any]]) -> str:
    if not tools:
        return "No tools visible to this user."
    width = max(len(tool["name"]) for tool in tools)
    rows = []
    for tool in tools:
        title = tool.get("title") or (tool.get("annotations") or {}).get("title") or ""
        description = first_line(tool.get("description"))
        rows.append(f"{tool['name']:<{width}}  {title + ': ' if title else ''}{description}".rstrip())
    return "\n".join(rows)


# -- the command --------------------------------------------------------------------------


class Command(BaseCommand):
    help = "Call an MCP tool in process as a user, answering its questions on the terminal (or --list the tools)."
    #: ``call_command(..., stdin=...)`` supplies the operator's typing in tests.
    stealth_options = ("stdin",)

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("tool", nargs="?", help="The tool to call.")
        parser.add_argument("--list", action="store_true", help="List the tools the user can see instead.")
        add_call_arguments(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        if options["list"]:
            run_list(self, options)
        elif not options.get("tool"):
            raise CommandError("Name a tool to call, or pass --list")
        else:
            run_call(self, options)


def add_call_arguments(parser: CommandParser, *, call: bool = True) -> None:
    """The options of ``mcp_call`` and of ``mcp_tools list|call``."""
    parser.add_argument("--user", help="Username to call as (default: MCP_TOOLS['STDIO_USER'], else anonymous if allowed).")
    if not call:
        return
    parser.add_argument("--arg", action="append", default=[], metavar="KEY=VALUE",
                        help="A tool argument (repeatable). VALUE is parsed as JSON unless the field takes only text "
                             "(a string or a choice of strings, optional or not; send null with --json-args).")
    parser.add_argument("--json-args", metavar="JSON", help="All arguments as one JSON object (--arg values override it).")
    parser.add_argument("--json", action="store_true", dest="raw_json",
                        help="Print the whole tools/call result as JSON (a paged result: one JSON document a page).")
    parser.add_argument("--max-pages", type=int, metavar="N",
                        help="A paged result (nextResumeToken) is followed to its last page, each page printed as it "
                             "comes; stop after N pages instead (stderr then says that more remain).")
    parser.add_argument("--no-input", "--noinput", action="store_false", dest="interactive",
                        help="Fail instead of prompting when the tool asks for input.")


T = TypeVar("T")


class RefusedAnswer(Exception):
    """The server refused the answer to the question ``key`` (``-32602`` with ``data.key``); the round
    still waits for one."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key = key
        self.message = message


async def in_prompt_thread(fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)`` (it reads what the operator types) on a daemon thread of its own: the event loop
    stays free, so Ctrl-C (which cancels the loop's main task) stops the command at the first press,
    and a thread still blocked in ``readline`` does not hold the process's exit. On the loop's own
    thread the first Ctrl-C did nothing (the read went on) and the second ended in a traceback."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def settle(value: Any, error: BaseException | None) -> None:
        if future.done():  # cancelled meanwhile (Ctrl-C): nobody waits for the answer
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(value)

    def run() -> None:
        try:
            outcome: tuple[Any, BaseException | None] = (fn(*args), None)
        except BaseException as exc:  # noqa: BLE001 - handed to the awaiting task as it is
            outcome = (None, exc)
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile (the command ended)
            loop.call_soon_threadsafe(settle, *outcome)

    threading.Thread(target=run, daemon=True, name="mcp_call-prompt").start()
    return await future


def _caller(command: BaseCommand, options: dict[str, Any]) -> InProcessCaller:
    stdin = options.get("stdin") or sys.stdin
    answerer = TerminalAnswerer(stdin, command.stdout, interactive=options.get("interactive", True))
    return InProcessCaller(principal_for(options.get("user")), answerer, command.stderr)


def _run(coro: Any) -> Any:
    return asyncio.run(coro)


def interrupted() -> CommandError:
    """What a Ctrl-C ends the command with: one line and the shell's status for SIGINT (130), not the
    KeyboardInterrupt traceback asyncio's runner raises after it cancelled the loop's task."""
    return CommandError("Interrupted (Ctrl-C).", returncode=130)


def run_list(command: BaseCommand, options: dict[str, Any]) -> None:
    """``--list``: the tools the user can see, one a line."""
    caller = _caller(command, options)
    try:
        tools = _run(caller.list_tools())
    except KeyboardInterrupt:
        raise interrupted() from None
    command.stdout.write(tool_table(tools))


def run_call(command: BaseCommand, options: dict[str, Any]) -> None:
    """Call ``options['tool']`` and print its result; a tool error is a CommandError (exit status 1).

    A page that carries ``nextResumeToken`` is printed, then the same call is made with that
    ``resumeToken`` for the next page, up to ``--max-pages`` pages: a terminal user asked for the
    tool's answer, and a first page printed alone would pass for all of it.
    """
    caller = _caller(command, options)
    name = options["tool"]
    max_pages = options.get("max_pages")
    if max_pages is not None and max_pages < 1:
        raise CommandError("--max-pages must be at least 1")

    async def call() -> None:
        schema = next((tool.get("inputSchema") for tool in await caller.list_tools() if tool.get("name") == name), None)
        arguments = parse_arguments(options.get("arg") or [], options.get("json_args"), schema)
        tool = registry.get_tool(name)
        if tool is not None and tool.background:
            # It runs on a Celery worker, not in this process: with none running the command waited in
            # silence (found by a review of operations). Plain: a note, not the wrapper's error style.
            command.stderr.write(f"({name} runs on a Celery worker: waiting for one to run it; Ctrl-C cancels the call)\n", str, ending="")
        token: str | None = None
        for page in itertools.count(1):
            result = await caller.call_tool(name, arguments, token)
            print_result(command, name, result, raw_json=bool(options.get("raw_json")))
            token = result.get("nextResumeToken")
            if not token:
                return
            if page == max_pages:
                note = f"({name} has more pages; printed {page}: raise or drop --max-pages for the rest)\n"
                command.stderr.write(note, str, ending="")  # plain: a note, not the wrapper's error style
                return

    try:
        _run(call())
    except BaseException as exc:
        # --no-input, a closed stdin, Ctrl-C or a failed round: the call is ended here, after
        # the loop (a Ctrl-C leaves the loop's task cancelled, so nothing more can await in it).
        caller.give_up(str(exc) or type(exc).__name__)
        if isinstance(exc, KeyboardInterrupt):
            raise interrupted() from None
        raise


def print_result(command: BaseCommand, name: str, result: dict[str, Any], *, raw_json: bool) -> None:
    """Print one ``tools/call`` result (one page); a tool error is a CommandError."""
    if raw_json:
        command.stdout.write(json.dumps(result, indent=2, ensure_ascii=False, default=str))
    if result.get("isError"):
        raise CommandError(f"{name} failed: {describe_content(result.get('content') or [])}")
    if not raw_json:
        command.stdout.write(format_result(result))
