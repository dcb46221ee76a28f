"""The saga flavor (seed 000): ``tools/callSaga`` and ``tools/resumeSaga``.

A call that needs input answers ``{state: "suspended", sagaToken, steps}``; the
client runs the steps and resumes with ``completedSteps`` (a result or an
error per step). A step error is journaled as a failed step, and the handler
sees it as :class:`~mcp_tools.StepFailed` at that ``await``.
"""

from __future__ import annotations

from typing import Any

from ... import engine, store
from ...engine.journal import Journal, Step, canonical_json, digest
from ...protocol.answers import InvalidAnswer, checked_step_answer, step_type
from ...protocol.errors import MAX_ARGUMENT_ERRORS, McpError, invalid_params
from ...registry import registry
from .. import core, tokens
from ..auth import Principal
from ..context import RequestContext
from . import resume as resume_tokens


def suspended(call_id: str, round_number: int, pending: list[Step], rc: RequestContext, target: core.Target) -> dict[str, Any]:
    """The ``suspended`` answer for one round: the steps the client should run."""
    return {
        "state": "suspended",
        "sagaToken": core.seal("saga", call_id, round_number, rc, target),
        "steps": [{"type": step_type(s.request["method"]), "stepId": s.key, "params": s.request["params"]} for s in pending if s.request],
    }


#: What a saga answers for a tool that runs on a background worker (it cannot follow one).
ON_WORKER = "This tool continues on a background worker, which a saga cannot follow; call it with tools/call."


def only_as_task(name: str) -> McpError:
    """-32602 for ``tools/callSaga`` of a tool whose ``taskSupport`` is ``"required"``.

    Not the refusal ``tools/call`` gives such a tool (-32021 "declare the extension", -32601 "add
    task"): nothing the client could add makes a saga a task, so the saga's params are what is wrong.
    """
    return invalid_params(f"Tool {name!r} runs only as a task, which a saga cannot be; call it with tools/call", {"name": name})


#: What ``tools/callSaga`` with a ``resumeToken`` answers (-32602): a saga starts a call; what goes on
#: with a token (a ``paginate=True`` tool's next page, the next poll) is a ``tools/call`` with it.
RESUME_WITH_TOOLS_CALL = "resumeToken goes with tools/call: send the token there for the next page or poll"


async def call(params: dict[str, Any], rc: RequestContext) -> dict[str, Any]:
    """``tools/callSaga``: run the tool until it completes or needs its first steps."""
    if resume_tokens.token_of(params) is not None:
        # Ignored, it answered page 1 again with a new token, for ever (and took a forged one).
        raise invalid_params(RESUME_WITH_TOOLS_CALL)
    target = await core.resolve_target("tools/callSaga", params, rc.principal)
    tool = registry.get_tool(target.name)  # target.tool is None for arguments that failed validation
    if tool is not None and tool.task_support == "required":
        # Refused before anything runs (no row, no question, no effect), as tools/call refuses it;
        # after resolve_target, so a tool the caller may not see is still just "Unknown tool".
        raise only_as_task(target.name)
    rc.flavor = "saga"
    inv = core.new_invocation(target, rc)
    outcome = await core.execute(target, inv)
    if isinstance(outcome, engine.NeedsInput):
        call_id = await core.suspend(inv, rc, 0)
        return suspended(call_id, 0, outcome.pending, rc, target)
    if isinstance(outcome, engine.Deferred):
        outcome = core.error_result(ON_WORKER)  # a background tool, or one that deferred
    return await core.finish(inv, target, outcome, rc, 0)


async def resume(params: dict[str, Any], rc: RequestContext) -> dict[str, Any]:
    """``tools/resumeSaga``: apply ``completedSteps`` to the suspended round and run on."""
    responses, errors = _completed_steps(params.get("completedSteps"))
    payload, row, journal = await core.load_bound_call("saga", params.get("sagaToken"), rc, None, "tools/call")
    rc.flavor = "saga"
    target = await core.resolve_target("tools/call", row.arguments, rc.principal)
    if target.params_digest != row.params_digest:
        raise core.invalid_token("saga")
    # Full history: steps answered in earlier rounds are ignored; ids this call never asked for are refused.
    # A ctx.once step is the server's own, never asked of the client: its key is refused as an unknown one
    # (it was accepted, which told the client the server's step keys; found by a review).
    never_asked = sorted(key for key in {*responses, *errors} if (step := journal.by_key(key)) is None or step.kind == "once")
    if never_asked:
        data: dict[str, Any] = {"stepIds": never_asked[:MAX_ARGUMENT_ERRORS]}
        if len(never_asked) > MAX_ARGUMENT_ERRORS:  # listed like argument errors: a body of unknown ids is not echoed whole
            data["omitted"] = len(never_asked) - MAX_ARGUMENT_ERRORS
        raise invalid_params("completedSteps has stepIds this saga never asked for", data)
    # ... and a step taken in an earlier round must be sent as it was taken: a history that says
    # otherwise is a client that believes it changed an answer the call already acted on.
    contradicted = sorted(key for key in {*responses, *errors} if _contradicts(journal.by_key(key), responses, errors, key))
    if contradicted:
        raise invalid_params("completedSteps contradicts steps this saga already took", {"stepIds": contradicted[:MAX_ARGUMENT_ERRORS]})
    round_number = payload["r"]

    def ask(call_id: str, next_round: int, pending: list[Step], carry: Journal | None) -> dict[str, Any]:
        return suspended(call_id, next_round, pending, rc, target)  # saga tokens carry no journal

    # Over every entry, pending or not, results and errors: an identical retry has the identical digest
    # whichever way its round was first taken (errors of earlier rounds, or none, or new ones).
    answers_digest = digest({**responses, **{k: {"__error__": e} for k, e in errors.items()}}) if errors else None
    failing_now = any((step := journal.by_key(key)) is not None and step.status == "pending" for key in errors)
    if not errors or (row.round == round_number and not failing_now):
        return await core.advance_and_run(row, journal, round_number, responses, target, rc, purpose="saga", ask=ask,
                                          answers_digest=answers_digest)
    assert answers_digest is not None
    return await _advance_with_failures(row, journal, round_number, responses, errors, answers_digest, target, rc, ask)


async def tool_of_token(token: Any, principal: Principal) -> str | None:
    """The name of the tool whose call a ``sagaToken`` resumes, for the transport's scope check; None
    when the token does not open for this caller or its call is gone (:func:`resume` refuses it then).

    ``tools/resumeSaga`` names no tool, so without this a token lacking the tool's OAuth scope met
    only :func:`resume`'s "Unknown tool", not the 403 step-up challenge ``tools/callSaga`` gets.
    Opened as :func:`resume` opens it, with nothing written: an expired call is left for it to end.
    """
    try:
        payload = tokens.unseal("saga", token)
    except tokens.InvalidToken:
        return None
    if not core.bound_to(payload, principal.id, "tools/call"):
        return None
    return await store.call_tool_name(payload.get("c"))


def _contradicts(step: Step | None, responses: dict[str, Any], errors: dict[str, Any], key: str) -> bool:
    """Whether ``completedSteps``' entry ``key`` disagrees with its step as an earlier round journaled
    it: a result for a step that failed or an error for one that succeeded, or another result or error
    (a result compared as it was journaled: checked, so ``5.0`` for an integer field is ``5``). A
    pending step, or one that is no client request (a ``ctx.once``), has nothing to disagree with."""
    if step is None or step.status == "pending" or not (step.request and "method" in step.request):
        return False
    if key in errors:
        return step.status != "failed" or canonical_json(errors[key]) != canonical_json(step.error)
    if step.status != "done":
        return True
    try:
        sent = checked_step_answer(step.request, responses[key])
    except InvalidAnswer:
        return True
    return canonical_json(sent) != canonical_json(step.response)


def _completed_steps(completed: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """``completedSteps`` as ``(results, errors)`` by stepId, each entry as seed 000's ``SagaStepResult``
    says: a stepId once, with a result or an error ``{code: number, message: string, data?}``, not both."""
    if not isinstance(completed, list) or not all(isinstance(s, dict) and isinstance(s.get("stepId"), str) for s in completed):
        raise invalid_params('"completedSteps" must be an array of {stepId, result | error}')
    responses: dict[str, Any] = {}
    errors: dict[str, Any] = {}
    for entry in completed:
        step_id = entry["stepId"]
        if step_id in responses or step_id in errors:
            raise invalid_params("completedSteps names a step more than once", {"stepId": step_id})
        error = entry.get("error")
        if error is None:
            responses[step_id] = entry.get("result")
            continue
        if "result" in entry:
            raise invalid_params("A completed step has a result or an error, not both", {"stepId": step_id})
        code = error.get("code") if isinstance(error, dict) else None
        if isinstance(code, bool) or not isinstance(code, (int, float)) or not isinstance(error.get("message"), str):
            raise invalid_params('A step\'s "error" must be {code: number, message: string, data?}', {"stepId": step_id})
        errors[step_id] = error
    return responses, errors


async def _advance_with_failures(
    row: Any, journal: Journal, round_number: int, responses: dict[str, Any], errors: dict[str, Any], answers_digest: str,
    target: core.Target, rc: RequestContext, ask: core.AskForInput,
) -> dict[str, Any]:
    """A round where some steps failed: journal them as failed, with the others' results."""
    if row.round != round_number:
        async def take_over() -> dict[str, Any]:
            return await core.rerun_round(row.id, round_number + 1, target, rc, ask=ask, on_defer=None)

        return await core.repeat_outcome(row.id, round_number, answers_digest, "saga", take_over)
    answers: dict[int, tuple[str, Any, Any]] = {}
    for key, error in errors.items():
        step = journal.by_key(key)
        if step is None or step.status != "pending":
            continue  # answered in an earlier round (a full history): ignored
        step.status = "failed"
        step.error = error
        answers[step.seq] = ("failed", None, error)
    for key, value in responses.items():
        step = journal.by_key(key)
        if step is not None and step.status == "pending":
            core.apply_answer(step, value, key)
            answers[step.seq] = ("done", step.response, None)
    return await core.run_next_round(row, journal, round_number, answers, answers_digest, target, rc, purpose="saga", ask=ask)
