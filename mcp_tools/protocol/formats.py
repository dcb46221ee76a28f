"""The string formats an elicitation's ``requestedSchema`` may name: ``email``, ``uri``, ``date``, ``date-time``.

jsonschema checks ``uri`` and ``date-time`` only when optional packages are installed
(``rfc3987``, ``rfc3339-validator``) and ``email`` hardly at all (any ``@``), so an answer
checked by it alone could carry "yesterday" for a date-time. These checkers follow the
RFCs JSON Schema names for each format, and need nothing beyond the standard library.
"""

from __future__ import annotations

import datetime
import ipaddress
import re
from collections.abc import Callable

_PCT = r"%[0-9A-Fa-f]{2}"
_UNRESERVED_SUBDELIMS = r"A-Za-z0-9\-._~!$&'()*+,;="
_PCHAR = rf"(?:[{_UNRESERVED_SUBDELIMS}:@]|{_PCT})"
_AUTHORITY = (
    rf"(?:(?:[{_UNRESERVED_SUBDELIMS}:]|{_PCT})*@)?"  # userinfo@
    rf"(?:\[[0-9A-Za-z{_UNRESERVED_SUBDELIMS}:]+\]|(?:[{_UNRESERVED_SUBDELIMS}]|{_PCT})*)"  # IP-literal or reg-name
    r"(?::[0-9]*)?"  # :port
)
#: RFC 3986 ``URI``: a scheme, then ``//authority`` and a path, or a path alone; query and fragment.
_URI = re.compile(
    rf"[A-Za-z][A-Za-z0-9+\-.]*:"
    rf"(?://{_AUTHORITY}(?:/{_PCHAR}*)*|{_PCHAR}*(?:/{_PCHAR}*)*)"
    rf"(?:\?(?:{_PCHAR}|[/?])*)?"
    rf"(?:#(?:{_PCHAR}|[/?])*)?"
)
_DATE = re.compile(r"(\d{4})-(\d{2})-(\d{2})")
#: RFC 3339 ``date-time`` (section 5.6); "T" and "Z" may be lower case (its note on 5.6).
_DATE_TIME = re.compile(r"(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.\d+)?(?:([Zz])|([+-])(\d{2}):(\d{2}))")
_ATEXT = r"[A-Za-z0-9!#$%&'*+\-/=?^_`{|}~]+"
#: RFC 5321 ``Mailbox``: a dot-string or quoted-string local part, then a domain or an address literal.
_MAILBOX = re.compile(
    rf'(?P<local>{_ATEXT}(?:\.{_ATEXT})*|"(?:[\x20\x21\x23-\x5b\x5d-\x7e]|\\[\x20-\x7e])*")@'
    r"(?:(?P<domain>[A-Za-z0-9](?:[A-Za-z0-9\-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9\-]*[A-Za-z0-9])?)*)"
    r"|\[(?P<literal>[^\[\]\\]+)\])"
)


def _is_date(year: str, month: str, day: str) -> bool:
    try:
        datetime.date(int(year), int(month), int(day))
    except ValueError:
        return False
    return True


def is_date(value: str) -> bool:
    """RFC 3339 ``full-date`` (``2025-02-28``; a real day of the calendar)."""
    match = _DATE.fullmatch(value)
    return match is not None and _is_date(*match.groups())


def is_date_time(value: str) -> bool:
    """RFC 3339 ``date-time``: a real date, a time of day and a required offset (``Z`` or ``±hh:mm``).

    A leap second (``:60``) is allowed where one can occur: at 23:59 UTC.
    """
    match = _DATE_TIME.fullmatch(value)
    if match is None:
        return False
    year, month, day, hour, minute, second, zulu, sign, offset_hour, offset_minute = match.groups()
    if not _is_date(year, month, day) or int(hour) > 23 or int(minute) > 59 or int(second) > 60:
        return False
    offset = 0
    if zulu is None:
        if int(offset_hour) > 23 or int(offset_minute) > 59:
            return False
        offset = (int(offset_hour) * 60 + int(offset_minute)) * (1 if sign == "+" else -1)
    if int(second) == 60:
        return (int(hour) * 60 + int(minute) - offset) % (24 * 60) == 23 * 60 + 59
    return True


def is_uri(value: str) -> bool:
    """RFC 3986 ``URI``: absolute (with a scheme), in URI characters only (no spaces, controls or non-ASCII)."""
    return _URI.fullmatch(value) is not None


def is_email(value: str) -> bool:
    """RFC 5321 ``Mailbox`` (``local-part@domain``, or an ``[address literal]``)."""
    match = _MAILBOX.fullmatch(value)
    if match is None or len(match["local"]) > 64:
        return False
    literal = match["literal"]
    if literal is None:
        return len(match["domain"]) <= 255
    try:  # an IPv4 address, or "IPv6:" and an IPv6 address (RFC 5321, 4.1.3)
        if literal[:5].lower() == "ipv6:":
            ipaddress.IPv6Address(literal[5:])
        else:
            ipaddress.IPv4Address(literal)
    except ValueError:
        return False
    return True


#: Each format's checker (a string in, whether it fits).
CHECKERS: dict[str, Callable[[str], bool]] = {
    "email": is_email,
    "uri": is_uri,
    "date": is_date,
    "date-time": is_date_time,
}
