"""Tools the stdio tests drive in a real ``mcp_stdio`` process."""

import time

import mcp_tools


@mcp_tools.tool
def chatty(text: str) -> str:
    """A sync tool that prints a debug line, as plenty of user code does.

    Args:
        text: Echoed back.
    """
    print(f"debug: chatty called with {text!r}")
    return text


@mcp_tools.tool
def slow_sync(seconds: float = 2.0) -> str:
    """Sleep in a thread, then answer.

    Args:
        seconds: How long.
    """
    time.sleep(seconds)
    return f"slept {seconds}"


@mcp_tools.tool
def quick_sync(text: str = "q") -> str:
    """A quick sync tool.

    Args:
        text: Echoed back.
    """
    return text


@mcp_tools.tool(thread_sensitive=False)
def nap_free(seconds: float = 2.0) -> str:
    """Sleep in a worker thread of the loop's default executor (thread_sensitive=False).

    Args:
        seconds: How long.
    """
    time.sleep(seconds)
    return f"napped {seconds}"
