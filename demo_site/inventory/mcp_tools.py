"""The inventory's MCP tools, resources and prompts: the public examples of ``mcp_tools``.

This module is autodiscovered (like ``admin.py``): every installed app's
``mcp_tools.py`` is imported when the server starts, and its decorators fill
the registry.

* Plain functions become tools. The input schema comes from the type hints,
  the descriptions from the docstring (``Args:`` section), the output schema
  from the return annotation.
* Sync functions run in a worker thread, so they can use the ORM directly.
* A parameter annotated ``ToolContext`` receives the call's context: ask the
  user (``ctx.elicit``), borrow the client's model (``ctx.sample``), run a side
  effect exactly once (``ctx.once``), report progress and log. It is not part
  of the input schema.
* ``raise mcp_tools.ToolError("...")`` returns ``isError: true`` with that message to the model.
"""

from __future__ import annotations

import ast
import asyncio
import json
import math
import operator
from decimal import Decimal
from typing import Annotated, Any, Literal

from django.db import transaction
from django.db.models import F, Q
from pydantic import BaseModel, Field

import mcp_tools
from mcp_tools.protocol.errors import invalid_params

from .models import AuditLog, Product

# ---------------------------------------------------------------------------
# Output models
# ---------------------------------------------------------------------------


class ProductOut(BaseModel):
    """A product as the tools return it."""

    sku: str = Field(description="Stock keeping unit, unique per product")
    name: str = Field(description="Display name")
    price: float = Field(description="Unit price")
    stock: int = Field(description="Units in stock")

    @classmethod
    def from_model(cls, product: Product) -> ProductOut:
        return cls(sku=product.sku, name=product.name, price=float(product.price), stock=product.stock)


class DeployReport(BaseModel):
    """What the ``deploy`` tool did."""

    service: str = Field(description="The service that was deployed")
    env: Literal["staging", "production"] = Field(description="The target environment")
    verdict: str = Field(description="The model's safety verdict")
    audit_id: int = Field(description="The id of the audit log entry")


# ---------------------------------------------------------------------------
# Simple tools
# ---------------------------------------------------------------------------

#: The longest SKU, and the longest text a search can find (a name): a longer value matches nothing,
#: and SQLite refuses a LIKE pattern past 50,000 characters ("pattern too complex", an internal error).
MAX_SKU_LENGTH = Product._meta.get_field("sku").max_length or 0
MAX_QUERY_LENGTH = max(MAX_SKU_LENGTH, Product._meta.get_field("name").max_length or 0)


@mcp_tools.tool
async def echo(text: str) -> str:
    """Return the text unchanged.

    Args:
        text: The text to send back.
    """
    return text


@mcp_tools.tool
def search_products(
    query: Annotated[str, Field(max_length=MAX_QUERY_LENGTH)] = "",
    limit: Annotated[int, Field(ge=1, le=100)] = 10,
) -> list[ProductOut]:
    """Search the products by SKU or name.

    Args:
        query: Text to look for in the SKU or the name (case-insensitive), at most as long as a name. Empty: all products.
        limit: The maximum number of products to return (1-100).
    """
    products = Product.objects.all()
    if query:
        products = products.filter(Q(sku__icontains=query) | Q(name__icontains=query))
    return [ProductOut.from_model(product) for product in products.order_by("sku")[:limit]]


# An OAuth bearer token also needs the inventory:write scope (DRF tokens are not scope-limited).
@mcp_tools.tool(permissions=["inventory.change_product"], scopes=["inventory:write"])
def restock(sku: str, quantity: Annotated[int, Field(ge=1, le=100_000)]) -> ProductOut:
    """Add units to a product's stock.

    Needs the inventory.change_product permission.

    Args:
        sku: The SKU of the product to restock.
        quantity: How many units to add (1-100000).
    """
    with transaction.atomic():
        updated = Product.objects.filter(sku=sku).update(stock=F("stock") + quantity)
        if not updated:
            raise mcp_tools.ToolError(f"Unknown SKU {sku!r}. Use search_products to find the right one.")
        product = ProductOut.from_model(Product.objects.get(sku=sku))
    # Clients subscribed to these resources get notifications/resources/updated.
    for uri in (f"inventory://products/{sku}", "inventory://products"):
        mcp_tools.notify_resource_updated_sync(uri)
    return product


# ---------------------------------------------------------------------------
# A calculator: a plain function that is both a tool and a sampling tool
# ---------------------------------------------------------------------------

MAX_EXPRESSION_LENGTH = 200
MAX_EXPONENT = 1000

_BINARY_OPERATORS: dict[type[ast.operator], Any] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY_OPERATORS: dict[type[ast.unaryop], Any] = {
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
}


def _evaluate(node: ast.AST) -> float:
    if isinstance(node, ast.Expression):
        return _evaluate(node.body)
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return float(node.value)
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY_OPERATORS:
        return _UNARY_OPERATORS[type(node.op)](_evaluate(node.operand))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY_OPERATORS:
        left = _evaluate(node.left)
        right = _evaluate(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > MAX_EXPONENT:
            raise mcp_tools.ToolError(f"Exponent too large (the limit is {MAX_EXPONENT})")
        if isinstance(node.op, ast.Pow) and left < 0 and not right.is_integer():
            raise mcp_tools.ToolError("A negative number cannot be raised to a fractional power")
        return _BINARY_OPERATORS[type(node.op)](left, right)
    raise mcp_tools.ToolError(f"Unsupported syntax: {ast.dump(node)[:60]}. Use numbers, + - * / // % ** and parentheses.")


@mcp_tools.tool
def calculator(expression: str) -> float:
    """Evaluate an arithmetic expression.

    Supports numbers, + - * / // % ** (power), unary minus and parentheses.
    Names, function calls and anything else are rejected.

    Args:
        expression: The expression, for example "(2 + 3) * 4 ** 2".
    """
    if len(expression) > MAX_EXPRESSION_LENGTH:
        raise mcp_tools.ToolError(f"Expression too long (the limit is {MAX_EXPRESSION_LENGTH} characters)")
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError:
        raise mcp_tools.ToolError(f"Not an arithmetic expression: {expression!r}") from None
    try:
        value = _evaluate(tree)
    except ZeroDivisionError:
        raise mcp_tools.ToolError("Division by zero") from None
    except OverflowError:
        raise mcp_tools.ToolError("The result is too large") from None
    if not math.isfinite(value):
        raise mcp_tools.ToolError("The result is too large")
    return value


# ---------------------------------------------------------------------------
# Tools that use the context
# ---------------------------------------------------------------------------


class TargetForm(BaseModel):
    """What the user is asked before a deployment."""

    env: Literal["staging", "production"] = Field(description="Environment to deploy to")
    confirm: bool = Field(True, description="Go ahead with the deployment")


def record_audit(actor: str, service: str, env: str, verdict: str) -> int:
    """Write the audit log entry of a deployment; returns its id."""
    entry = AuditLog.objects.create(
        actor=actor,
        action="deploy",
        detail={"service": service, "env": env, "verdict": verdict},
    )
    return entry.pk


@mcp_tools.tool
async def deploy(ctx: mcp_tools.ToolContext, service: str) -> DeployReport:
    """Deploy a service, after asking the user where and the model whether it is safe.

    Asks the user for the target environment (elicitation), asks the client's
    model for a safety verdict (sampling), then writes an audit log entry
    exactly once, however often the call is resumed.

    Args:
        service: The name of the service to deploy.
    """
    try:
        target = await ctx.elicit(f"Where should {service} be deployed?", schema=TargetForm, key="target")
    except (mcp_tools.ElicitationDeclined, mcp_tools.ElicitationCancelled):
        raise mcp_tools.ToolError("Deployment cancelled by the user") from None
    if not target.confirm:
        raise mcp_tools.ToolError("Deployment cancelled by the user")
    verdict = await ctx.sample(
        f"Is deploying {service} to {target.env} safe? Answer yes or no.",
        max_tokens=100,
        key="verdict",
    )
    actor = ctx.user.get_username() if ctx.user.is_authenticated else ""
    audit_id = await ctx.once("audit", record_audit, actor, service, target.env, verdict.text)
    return DeployReport(service=service, env=target.env, verdict=verdict.text, audit_id=audit_id)


@mcp_tools.tool
async def ask_with_calculator(ctx: mcp_tools.ToolContext, question: str) -> str:
    """Ask the client's model a question; it may use the calculator tool to answer.

    The model's calculator calls run here, on the server, and their results
    are sent back to the model until it gives its final answer.

    Args:
        question: The question for the model, for example "What is 17% of 2340?".
    """
    result = await ctx.sample(question, tools=[calculator], max_tokens=500, key="ask")
    return result.text


@mcp_tools.tool
async def slow_count(ctx: mcp_tools.ToolContext, n: Annotated[int, Field(ge=1, le=100)] = 5) -> str:
    """Count to n slowly, reporting progress and logging each step.

    Args:
        n: The number to count to (1-100).
    """
    for i in range(1, n + 1):
        await asyncio.sleep(0.05)
        await ctx.report_progress(i, n, f"step {i}")
        await ctx.log("info", f"counted {i}")
    return f"counted to {n}"


# ---------------------------------------------------------------------------
# Resources
# ---------------------------------------------------------------------------


def complete_sku(value: str, arguments: dict[str, Any] | None = None) -> mcp_tools.Completions:
    """SKUs starting with ``value`` (for completion/complete): the first 100, and whether there are
    more (one row past them is fetched to know, instead of counting every match). A value longer than
    any SKU starts none: nothing, without a query."""
    if len(value) > MAX_SKU_LENGTH:
        return mcp_tools.Completions([], has_more=False)
    found = list(Product.objects.filter(sku__istartswith=value).order_by("sku").values_list("sku", flat=True)[:101])
    return mcp_tools.Completions(found[:100], has_more=len(found) > 100)


def _product_dict(product: Product) -> dict[str, Any]:
    return ProductOut.from_model(product).model_dump()


@mcp_tools.resource("inventory://products", name="products", title="All products", mime_type="application/json")
def all_products() -> str:
    """Every product, as a JSON array."""
    return json.dumps([_product_dict(product) for product in Product.objects.order_by("sku")])


@mcp_tools.resource(
    "inventory://products/{sku}",
    name="product",
    title="One product",
    mime_type="application/json",
    completions={"sku": complete_sku},
)
def product_by_sku(sku: str) -> str:
    """One product by SKU, as a JSON object."""
    product = Product.objects.filter(sku=sku).first()
    if product is None:
        raise mcp_tools.ResourceNotFound(f"inventory://products/{sku}")
    return json.dumps(_product_dict(product))


# ---------------------------------------------------------------------------
# Prompts
# ---------------------------------------------------------------------------

LOW_STOCK = 10


@mcp_tools.prompt(completions={"sku": complete_sku})
def restock_advice(sku: str) -> str:
    """Ask the model whether a product should be restocked, and by how much.

    Args:
        sku: The SKU of the product.
    """
    product = Product.objects.filter(sku=sku).first()
    if product is None:
        raise invalid_params(f"Unknown SKU {sku!r}")
    value = product.price * product.stock
    return (
        f"Product {product.sku} ({product.name}) costs {product.price} and has {product.stock} units in stock "
        f"(stock value {value.quantize(Decimal('0.01'))}). We consider fewer than {LOW_STOCK} units low. "
        "Should we restock it, and by how many units? If yes, call the restock tool."
    )
