"""Typed field access for records read from disk.

Every decoder takes values through these helpers, so a wrong type always gives
the same kind of one-line reason naming the field ("field 'priority': expected
an integer, got 'high'"). Lenient where Bernstein's own writers vary (numbers
as strings, ISO or epoch timestamps), strict otherwise.
"""

from __future__ import annotations

import datetime as dt
import math
import reprlib
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any


class RecordError(ValueError):
    """A record that cannot be used; the message is the reason shown to the operator."""


_MISSING = object()


def clean(text: str) -> str:
    """Text safe to print and encode: lone surrogates (from JSON escapes) become '?'."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace").decode("utf-8")
    return text


def _bounded_repr() -> reprlib.Repr:
    shape = reprlib.Repr()
    shape.maxlevel = 3
    shape.maxlist = shape.maxtuple = shape.maxset = shape.maxfrozenset = shape.maxdeque = 4
    shape.maxdict = 4
    shape.maxstring = shape.maxother = shape.maxlong = 60
    return shape


_BOUNDED = _bounded_repr()


def brief(value: object, limit: int = 40) -> str:
    """A bad value as an error shows it: a repr of at most `limit` characters, made with
    bounded work (nesting, items and string lengths are cut *before* formatting: the
    full repr of a small YAML alias bomb is gigabytes)."""
    try:
        text = _BOUNDED.repr(value)
    except (ValueError, RecursionError):  # an int too long to convert, and the like
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[:max(0, limit - 3)] + "..."



def req_str(d: Mapping[str, Any], key: str) -> str:
    value = d.get(key, _MISSING)
    if type(value) is str and value.isascii() and value[:1].isalnum():
        return value  # the common case, decided without the checks below (same result)
    if value is _MISSING or value is None:
        raise RecordError(f"missing required key '{key}'")
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise RecordError(f"field '{key}': expected a string, got {brief(value)}")
    text = clean(str(value))
    if not text.strip():
        raise RecordError(f"field '{key}' is empty")
    return text


def opt_str(d: Mapping[str, Any], key: str, default: str | None = None) -> str | None:
    value = d.get(key)
    if type(value) is str and value.isascii():
        return value  # the common case: clean() would return it unchanged
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise RecordError(f"field '{key}': expected a string, got {brief(value)}")
    return clean(str(value))


def str_or(d: Mapping[str, Any], key: str, default: str) -> str:
    value = opt_str(d, key, default)
    return default if value is None else value


def _to_int(key: str, value: object) -> int:
    if type(value) is int:
        return value  # the common case
    if isinstance(value, bool):
        raise RecordError(f"field '{key}': expected an integer, got {brief(value)}")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            pass
    raise RecordError(f"field '{key}': expected an integer, got {brief(value)}")


def opt_int(d: Mapping[str, Any], key: str, default: int | None = None) -> int | None:
    value = d.get(key)
    return default if value is None else _to_int(key, value)


def int_or(d: Mapping[str, Any], key: str, default: int) -> int:
    value = d.get(key)
    return default if value is None else _to_int(key, value)


def _to_float(key: str, value: object) -> float:
    if type(value) is float and math.isfinite(value):
        return value  # the common case, decided without the checks below (same result)
    if isinstance(value, bool):
        raise RecordError(f"field '{key}': expected a number, got {brief(value)}")
    if isinstance(value, (int, float)):
        try:
            number = float(value)
        except OverflowError:
            raise RecordError(f"field '{key}': number too large, got {brief(value)}") from None
    elif isinstance(value, str):
        try:
            number = float(value.strip())
        except (ValueError, OverflowError):
            raise RecordError(f"field '{key}': expected a number, got {brief(value)}") from None
    else:
        raise RecordError(f"field '{key}': expected a number, got {brief(value)}")
    if not math.isfinite(number):
        raise RecordError(f"field '{key}': expected a finite number, got {brief(value)}")
    return number


def opt_float(d: Mapping[str, Any], key: str, default: float | None = None) -> float | None:
    value = d.get(key)
    return default if value is None else _to_float(key, value)


def float_or(d: Mapping[str, Any], key: str, default: float) -> float:
    value = d.get(key)
    return default if value is None else _to_float(key, value)


def opt_bool(d: Mapping[str, Any], key: str, default: bool | None = None) -> bool | None:
    value = d.get(key)
    if value is True or value is False:
        return value
    if value is None:
        return default
    if isinstance(value, str) and value.strip().lower() in {"true", "false"}:
        return value.strip().lower() == "true"
    raise RecordError(f"field '{key}': expected true or false, got {brief(value)}")


def bool_or(d: Mapping[str, Any], key: str, default: bool) -> bool:
    value = opt_bool(d, key, default)
    return default if value is None else value


def str_tuple(d: Mapping[str, Any], key: str) -> tuple[str, ...]:
    value = d.get(key)
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if not isinstance(value, (list, tuple)):
        raise RecordError(f"field '{key}': expected a list of strings, got {brief(value)}")
    out = []
    for item in value:
        if isinstance(item, bool) or not isinstance(item, (str, int)):
            raise RecordError(f"field '{key}': expected a list of strings, got item {brief(item)}")
        out.append(clean(str(item)))
    return tuple(out)


def mapping(d: Mapping[str, Any], key: str) -> MappingProxyType[str, Any]:
    value = d.get(key)
    if value is None:
        return MappingProxyType({})
    if not isinstance(value, dict):
        raise RecordError(f"field '{key}': expected an object, got {brief(value)}")
    return MappingProxyType(value)


def to_epoch(key: str, value: object) -> float:
    """Epoch seconds from a number, a numeric string, an ISO-8601 string or a datetime."""
    if type(value) is float and math.isfinite(value):
        return value  # the common case (as _to_float would)
    if isinstance(value, dt.datetime):
        when = value if value.tzinfo else value.replace(tzinfo=dt.UTC)
        return when.timestamp()
    if isinstance(value, dt.date):
        return dt.datetime(value.year, value.month, value.day, tzinfo=dt.UTC).timestamp()
    if isinstance(value, str):
        text = value.strip()
        if len(text) >= 10 and text[4] == "-" and text[:4].isdigit():
            try:  # looks like an ISO date (Bernstein's gate lines): try that first
                return to_epoch(key, dt.datetime.fromisoformat(text.replace("Z", "+00:00")))
            except ValueError:
                pass  # not ISO after all: the general path below decides
        try:
            return _to_float(key, text)
        except RecordError:
            pass
        try:
            when = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            raise RecordError(
                f"field '{key}': expected epoch seconds or an ISO-8601 time, got {brief(value)}"
            ) from None
        return to_epoch(key, when)
    return _to_float(key, value)


def opt_epoch(d: Mapping[str, Any], key: str) -> float | None:
    value = d.get(key)
    return None if value is None else to_epoch(key, value)


def choice(d: Mapping[str, Any], key: str, allowed: frozenset[str],
           default: str | None = None) -> str:
    """A string that must be one of `allowed` (required when there is no default)."""
    value = req_str(d, key) if default is None else str_or(d, key, default)
    if value not in allowed:
        raise RecordError(f"field '{key}': '{value}' is not one of {', '.join(sorted(allowed))}")
    return value
