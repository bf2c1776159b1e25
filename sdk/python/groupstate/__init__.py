"""groupstate: Python handlers for groupstate.

Two kinds of handler, as in PySpark: a function (applyInPandasWithState, ABI v1, below) or a
StatefulProcessor subclass (Spark 4's Row-based transformWithState, ABI v2: see
groupstate.stateful_processor, whose names are importable from here too).

A handler module defines the entry point (``handle`` unless built with another ``--entry``)::

    import groupstate                    # groupstate.config: the spec's config, a dict

    def handle(key, rows, state):
        # key: a tuple of the grouping values, like PySpark's
        # rows: an iterable of chunks, each a list of dicts in arrival order
        # state: a GroupState, PySpark's API
        yield {"user_id": key[0], ...}   # output rows; a returned list works too

An exception escaping the handler fails the group: its outputs and state changes are
discarded and the traceback is the dead letter's error.

This package runs inside the Python runtime module (sdk/python/runtime); the C glue there calls
``_init`` once per instance and the entry once per group, with a ``GroupState`` it makes itself
(the type is C code in the glue, ``_groupstate.GroupState``: no Python code runs per group but
the handler's).
"""

import gc as _gc
import sys as _sys

import _json
import _groupstate

# json's C parts only (_json): the json package would import re, enum, functools and more at
# every instance's start. traceback is imported when first needed (a failure), which keeps it
# (and tokenize, linecache, ...) out of the start too.

__all__ = [
    "config",
    "deployment",
    "GroupState",
    "GroupStateTimeout",
    "GroupStateError",
    "GroupStateValueError",
    "GroupStateTypeError",
    "GroupStateRuntimeError",
    "log",
    "parse_duration_ms",
    "config_duration_ms",
    # ABI v2, from groupstate.stateful_processor (imported when first named)
    "StatefulProcessor",
    "StatefulProcessorHandle",
    "ValueState",
    "ListState",
    "MapState",
    "TimerValues",
    "ExpiredTimerInfo",
    "Rows",
    "inputs",
]

_V2_NAMES = frozenset(__all__[__all__.index("StatefulProcessor"):])


def __getattr__(name):
    # The v2 names load groupstate.stateful_processor when first used, so that a v1 handler's
    # instances do not import it.
    if name in _V2_NAMES:
        from groupstate import stateful_processor

        return getattr(stateful_processor, name)
    raise AttributeError(f"module 'groupstate' has no attribute {name!r}")

#: The spec's ``config`` section, a dict (``{}`` when the spec has none).
config = {}

#: The deployment's name.
deployment = ""

_NONE, _PROCESSING_TIME, _EVENT_TIME = 0, 1, 2
_timeout_mode = _NONE
_has_watermark = False

_KEEP, _UPDATE, _REMOVE = 0, 1, 2


class GroupStateTimeout:
    """PySpark's timeout configurations, as the deployment's timeout mode names them."""

    NoTimeout = "NoTimeout"
    ProcessingTimeTimeout = "ProcessingTimeTimeout"
    EventTimeTimeout = "EventTimeTimeout"


class GroupStateError(Exception):
    """Base of the errors GroupState raises (PySpark raises PySparkException subclasses)."""


class GroupStateValueError(GroupStateError, ValueError):
    """A value out of range (PySparkValueError)."""


class GroupStateTypeError(GroupStateError, TypeError):
    """A value of the wrong type (PySparkTypeError)."""


class GroupStateRuntimeError(GroupStateError, RuntimeError):
    """An operation the deployment does not allow (PySparkRuntimeError)."""


def log(message, level=0):
    """Writes message to the host's log at level (-4 debug, 0 info, 4 warn, 8 error), tagged
    with the deployment and the current group's key."""
    _groupstate.log(int(level), str(message))


_DURATION_UNITS = {
    "ns": 1,
    "us": 1_000,
    "\u00b5s": 1_000,
    "\u03bcs": 1_000,
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60_000_000_000,
    "h": 3_600_000_000_000,
}
_DIGITS = "0123456789"


def _parse_duration_ns(s):
    """Go's time.ParseDuration: "10s", "1m30s", "250ms", "-1.5h", "0"."""
    orig = s
    if not isinstance(s, str):
        raise GroupStateTypeError("groupstate: a duration is an int of milliseconds or a string such as \"10s\"")
    neg = False
    if s[:1] in "+-" and s:
        neg = s[0] == "-"
        s = s[1:]
    if s == "0":
        return 0
    if not s:
        raise GroupStateValueError(f"groupstate: invalid duration {orig!r}")
    total = 0
    pos = 0
    n = len(s)
    while pos < n:
        # a number ([0-9]*(\.[0-9]*)?, not empty nor a lone dot), then a unit
        start = pos
        while pos < n and s[pos] in _DIGITS:
            pos += 1
        whole, frac = s[start:pos], ""
        if pos < n and s[pos] == ".":
            pos += 1
            start = pos
            while pos < n and s[pos] in _DIGITS:
                pos += 1
            frac = s[start:pos]
        unit = s[pos:pos + 2]
        if unit not in _DURATION_UNITS or len(unit) != 2:
            unit = s[pos:pos + 1]
        if not (whole or frac) or unit not in _DURATION_UNITS:
            raise GroupStateValueError(f"groupstate: invalid duration {orig!r}")
        pos += len(unit)
        scale = _DURATION_UNITS[unit]
        v = int(whole or "0") * scale
        if frac:
            v += int(frac) * scale // (10 ** len(frac))
        total += v
    if total > (1 << 63) - 1 + (1 if neg else 0):
        raise GroupStateValueError(f"groupstate: invalid duration {orig!r}: overflow")
    return -total if neg else total


def parse_duration_ms(value):
    """A config duration in milliseconds: a Go duration string ("10s", "1m30s", "250ms") or a
    number of milliseconds; None stays None. Truncates to whole milliseconds."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise GroupStateTypeError("groupstate: a duration is a number of milliseconds or a string such as \"10s\"")
    if isinstance(value, (int, float)):
        return int(value)
    ns = _parse_duration_ns(value)
    return ns // 1_000_000 if ns >= 0 else -((-ns) // 1_000_000)


def config_duration_ms(name):
    """config[name] in milliseconds, like the Go SDK's Config.Duration: a Go duration string
    ("10s", "1m30s", "250ms") or a number of milliseconds; None when absent or null. Raises
    GroupStateValueError("groupstate: config NAME: ...") otherwise (at import: the init fails)."""
    try:
        return parse_duration_ms(config.get(name))
    except (ValueError, TypeError) as e:
        msg = str(e)
        if msg.startswith("groupstate: "):
            msg = msg[len("groupstate: "):]
        raise GroupStateValueError(f"groupstate: config {name}: {msg}") from None


def _default(o):
    # json.JSONEncoder.default's error
    raise TypeError(f"Object of type {o.__class__.__name__} is not JSON serializable")


# json's C encoder made once (JSONEncoder.encode makes one per call): compact, UTF-8, no NaN;
# no circular-reference markers (a cycle ends in RecursionError instead). It returns the
# JSON's chunks; _encode joins them.
_encode_chunks = _json.make_encoder(None, _default, _json.encode_basestring, None, ":", ",", False, False, False)


def _encode(value):
    return "".join(_encode_chunks(value, 0))


_NEG_INF, _POS_INF, _NAN = float("-inf"), float("inf"), float("nan")


class _DecoderContext:
    # what json.JSONDecoder() gives its C scanner: strict, float, int, NaN and the infinities
    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = {"-Infinity": _NEG_INF, "Infinity": _POS_INF, "NaN": _NAN}.__getitem__
    memo = None


#: json's C scanner as json.loads uses it: _scan_once(str, index) -> (value, end); the glue
#: decodes rows, keys and states with it.
_scan_once = _json.make_scanner(_DecoderContext())

_WHITESPACE = " \t\n\r"


def _loads(b):
    """json.loads(b) for a valid document, through the C scanner; anything else goes to
    json.loads itself, for its exact error."""
    s = b.decode("utf-8") if isinstance(b, (bytes, bytearray)) else b
    try:  # the usual document: no whitespace around it
        v, end = _scan_once(s, 0)
        if end == len(s):
            return v
    except (StopIteration, ValueError):
        pass
    i = len(s) - len(s.lstrip(_WHITESPACE))
    try:
        v, end = _scan_once(s, i)
    except (StopIteration, ValueError):
        pass
    else:
        if not s[end:].strip(_WHITESPACE):
            return v
    import json

    return json.loads(b)


#: The state of one key for one call: PySpark's GroupState (applyInPandasWithState), a C type
#: of the glue (sdk/python/runtime/glue.c). Values are plain Python values stored as JSON.
GroupState = _groupstate.GroupState

_new_state = GroupState


# GroupState's errors, the encoder of state values and the duration parser, for the glue.
_groupstate._bind(GroupStateValueError, GroupStateTypeError, GroupStateRuntimeError, _encode_chunks, _parse_duration_ns)


def _format_exception(exc):
    """The error of a failed group: the traceback without the glue's own frames."""
    import traceback

    text = "".join(traceback.format_exception(exc))
    return text.rstrip("\n")


def _init(name, config_bytes, timeout_mode, flags, want_class=False):
    """Called by the glue's gs_init (v1) or groupstate.stateful_processor._init_v2 (v2): sets
    config and the timeout mode, imports the handler and returns its entry function (v1) or
    class (want_class, v2)."""
    global config, deployment, _timeout_mode, _has_watermark
    try:
        c = _loads(config_bytes)
    except ValueError as e:
        raise GroupStateValueError(f"groupstate: config is not a JSON object: {e}") from None
    if not isinstance(c, dict):
        raise GroupStateValueError("groupstate: config is not a JSON object")
    if timeout_mode not in (_NONE, _PROCESSING_TIME, _EVENT_TIME):
        raise GroupStateValueError(f"groupstate: unknown timeout mode {timeout_mode}")
    config = c
    deployment = name.decode("utf-8")
    _timeout_mode = timeout_mode
    _has_watermark = bool(flags & 1)
    _groupstate._configure(_timeout_mode, _has_watermark)
    files = _groupstate.files()
    spec = files.get("__groupstate_entry__", b"").decode("utf-8")
    module_name, _, func = spec.partition(":")
    if not module_name or not func:
        raise GroupStateRuntimeError("groupstate: the module has no handler entry (build it with groupstate build --lang python)")
    __import__(module_name)
    mod = _sys.modules[module_name]
    fn = getattr(mod, func, None)
    if want_class:
        if fn is None:
            raise GroupStateRuntimeError(f"groupstate: {module_name}.py has no class {func}(StatefulProcessor)")
        return fn
    if isinstance(fn, type):
        raise GroupStateRuntimeError(
            f"groupstate: {module_name}.{func} is a class; a module built with a function entry calls handle(key, rows, state)")
    if not callable(fn):
        raise GroupStateRuntimeError(f"groupstate: {module_name}.py has no function {func}(key, rows, state)")
    # What the start made (the SDK, the handler's modules) lives as long as the instance: out
    # of the collector's sight, a collection walks only the calls' objects (a quarter to a
    # third less per group in logincount; docs/performance.md).
    _gc.freeze()
    return fn
