"""Reading and copying the state a learner's ``schedule_iteration`` returns (spec/learner.md, 2).

The state lists every request that ever arrived, finished ones included, so reading it each
iteration costs the whole run's size: at a thousand requests, checking each record in Python
took most of a learner's check. :func:`readable_state` therefore asks msgspec, in C, whether the
state has the shape first, and walks it in Python only when msgspec refuses, to name what is
wrong; the Python walk alone decides, so the fast path may only ever accept what it accepts.
"""

from __future__ import annotations

import copy
from typing import Any

import msgspec

STATE_KEYS = ("waiting", "running", "finished", "free_pages")


class LearnerStateError(Exception):
    """The state a learner's ``schedule_iteration`` returned cannot be read (PROTO-1)."""

    call = "schedule_iteration"


class _Record(msgspec.Struct):
    id: str
    generated: int
    pages: list[int]


class _State(msgspec.Struct):
    waiting: list[_Record]
    running: list[_Record]
    finished: list[_Record]
    free_pages: list[int]


def readable_state(state: Any, plain: bool = False) -> dict[str, Any]:
    """The returned state if it has the shape of spec/learner.md, else a LearnerStateError.

    ``plain``: the state holds no types but dict, list, str, int, float, bool and None (it was
    decoded from msgpack), so no tuple or other mapping can stand where a list or dict must.
    """
    if _has_shape(state, plain):
        return state  # type: ignore[no-any-return]
    return walked_state(state)


def walked_state(state: Any) -> dict[str, Any]:
    """:func:`readable_state` by a walk in Python alone, which names the first fault it meets."""
    if state is None:
        raise LearnerStateError(
            "schedule_iteration returned None; it must return the new state "
            "(did you forget `return state`?)"
        )
    if not isinstance(state, dict):
        raise LearnerStateError(
            f"schedule_iteration must return the state dict, got {type(state).__name__}"
        )
    for key in STATE_KEYS:
        if key not in state:
            raise LearnerStateError(f"the returned state has no key '{key}'")
        if not isinstance(state[key], list):
            raise LearnerStateError(
                f"state['{key}'] must be a list, got {type(state[key]).__name__}"
            )
    for page in state["free_pages"]:
        if not is_int(page):
            raise LearnerStateError(f"state['free_pages'] holds {page!r}, not a page id (an int)")
    for key in ("waiting", "running", "finished"):
        for index, record in enumerate(state[key]):
            _check_record(record, f"state['{key}'][{index}]")
    return state


def _has_shape(state: Any, plain: bool) -> bool:
    """Whether the Python walk of :func:`readable_state` would accept ``state``, decided fast.

    msgspec's strict conversion refuses a bool or a float for an int, as the walk does, but
    takes any sequence for a list and any mapping for a dict; those two are checked here.
    """
    if not isinstance(state, dict) or not all(
        isinstance(state.get(key), list) for key in STATE_KEYS
    ):
        return False
    try:
        msgspec.convert(state, _State, strict=True)
    except (msgspec.ValidationError, TypeError, ValueError, RecursionError):
        return False
    return plain or all(
        isinstance(record, dict) and isinstance(record["pages"], list)
        for key in ("waiting", "running", "finished")
        for record in state[key]
    )


def _check_record(record: Any, where: str) -> None:
    if not isinstance(record, dict):
        raise LearnerStateError(f"{where} must be a request dict, got {type(record).__name__}")
    if not isinstance(record.get("id"), str):
        raise LearnerStateError(f"{where} has no string 'id'")
    label = f"{where} (request '{record['id']}')"
    if not is_int(record.get("generated")):
        raise LearnerStateError(
            f"{label}: 'generated' must be an int, got {record.get('generated')!r}"
        )
    pages = record.get("pages")
    if not isinstance(pages, list) or not all(is_int(p) for p in pages):
        raise LearnerStateError(
            f"{label}: 'pages' must be a list of page ids (ints), got {pages!r}"
        )


def copy_state(state: dict[str, Any]) -> dict[str, Any]:
    """A deep copy, fast for the state's usual shape (lists of flat request dicts).

    ``copy.deepcopy`` of a state with a thousand finished requests dominated a run at realistic
    sizes; ints, strings and lists of page ids are copied directly, anything else deeply.
    """
    return {key: _copy_value(value) for key, value in state.items()}


def _copy_value(value: Any) -> Any:
    kind = type(value)
    if kind in _ATOMIC:
        return value
    if kind is list:
        if all(type(item) is int for item in value):
            return value.copy()
        return [_copy_record(item) if type(item) is dict else _copy_value(item) for item in value]
    if kind is dict:
        return {key: _copy_value(item) for key, item in value.items()}
    return copy.deepcopy(value)


def _copy_record(record: dict[Any, Any]) -> dict[Any, Any]:
    """A request dict: flat values and a list of page ids, copied without recursion."""
    copied = record.copy()
    for key, item in copied.items():
        kind = type(item)
        if kind is list and all(type(page) is int for page in item):
            copied[key] = item.copy()
        elif kind not in _ATOMIC:
            copied[key] = _copy_value(item)
    return copied


_ATOMIC = (int, str, bool, float, type(None))


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
