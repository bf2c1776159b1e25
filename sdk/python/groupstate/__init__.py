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
``_init`` once per instance and ``_new_state`` / the entry once per group.
"""

import gc as _gc
import json as _json

import _groupstate

# re and traceback are imported when first needed (a duration string, a failure), which keeps
# them (and tokenize, linecache, ...) out of every instance's start-up.

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
_DURATION_PART = None


def _parse_duration_ns(s):
    """Go's time.ParseDuration: "10s", "1m30s", "250ms", "-1.5h", "0"."""
    global _DURATION_PART
    if _DURATION_PART is None:
        import re

        _DURATION_PART = re.compile(r"([0-9]*(?:\.[0-9]*)?)(ns|us|\u00b5s|\u03bcs|ms|s|m|h)")
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
    while pos < len(s):
        m = _DURATION_PART.match(s, pos)
        if not m or m.group(1) in ("", "."):
            raise GroupStateValueError(f"groupstate: invalid duration {orig!r}")
        num, unit = m.group(1), m.group(2)
        whole, _, frac = num.partition(".")
        scale = _DURATION_UNITS[unit]
        v = int(whole or "0") * scale
        if frac:
            v += int(frac) * scale // (10 ** len(frac))
        total += v
        pos = m.end()
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


_encoder = _json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))

try:
    from json.encoder import c_make_encoder as _c_make_encoder, encode_basestring as _encode_basestring
except ImportError:  # pragma: no cover (the runtime has json's C accelerator)
    _c_make_encoder = None

if _c_make_encoder is not None:
    # json's C encoder made once (JSONEncoder.encode makes one per call): compact, UTF-8, no
    # NaN; no circular-reference markers (a cycle ends in RecursionError instead).
    _encode_chunks = _c_make_encoder(None, _encoder.default, _encode_basestring, None, ":", ",", False, False, False)

    def _encode(value):
        return "".join(_encode_chunks(value, 0))
else:
    _encode_chunks = None
    _encode = _encoder.encode


class GroupState:
    """The state of one key for one call: PySpark's GroupState (applyInPandasWithState).

    Values are plain Python values stored as JSON (dicts, lists, str, int, float, bool).
    """

    __slots__ = ("_exists", "_value", "_raw", "_timed_out", "_T", "_W", "_action", "_timeout")

    def __init__(self, exists, value, timed_out, processing_time_ms, watermark_ms):
        self._exists = bool(exists)
        self._value = value if exists else None
        self._raw = None
        self._timed_out = bool(timed_out)
        self._T = processing_time_ms
        self._W = watermark_ms
        self._action = _KEEP
        self._timeout = 0

    @property
    def exists(self):
        """Whether the key has a state value."""
        return self._exists

    @property
    def get(self):
        """The state value; raises GroupStateValueError when there is none."""
        if not self._exists:
            raise GroupStateValueError("groupstate: state is either not defined or has already been removed")
        return self._value

    @property
    def getOption(self):
        """The state value, or None when there is none."""
        return self._value if self._exists else None

    @property
    def hasTimedOut(self):
        """Whether this is a timeout call (no rows)."""
        return self._timed_out

    def update(self, newValue):
        """Sets the state value; None is refused (GroupStateTypeError), as is a value JSON
        cannot encode."""
        if newValue is None:
            raise GroupStateTypeError("groupstate: null is not a valid state value")
        try:
            raw = _encode(newValue)
        except (TypeError, ValueError) as e:
            raise GroupStateTypeError(f"groupstate: encoding state: {e}") from None
        self._value = newValue
        self._raw = raw
        self._exists = True
        self._action = _UPDATE

    def remove(self):
        """Removes the state value (a timeout set in this call stays)."""
        self._value = None
        self._raw = None
        self._exists = False
        self._action = _REMOVE

    def setTimeoutDuration(self, durationMs):
        """Times the key out durationMs (an int of milliseconds, or a duration string such as
        "10s") of processing time from now, unless it gets rows first. Needs the deployment's
        timeout mode processing_time."""
        if _timeout_mode != _PROCESSING_TIME:
            raise GroupStateRuntimeError("groupstate: cannot set timeout duration without processing_time timeout")
        if isinstance(durationMs, bool) or not isinstance(durationMs, (int, str)):
            raise GroupStateTypeError("groupstate: a timeout duration is an int of milliseconds or a string such as \"10s\"")
        if isinstance(durationMs, str):
            ns = _parse_duration_ns(durationMs)
            d = ns // 1_000_000 if ns >= 0 else -((-ns) // 1_000_000)
        else:
            d = durationMs
        if d <= 0:
            raise GroupStateValueError("groupstate: timeout duration must be positive")
        ts = self._T + d
        if ts > (1 << 63) - 1:
            raise GroupStateValueError("groupstate: timeout duration overflows the processing time")
        self._timeout = ts

    def setTimeoutTimestamp(self, timestampMs):
        """Times the key out when the watermark passes timestampMs (epoch milliseconds). Needs
        the deployment's timeout mode event_time."""
        if _timeout_mode != _EVENT_TIME:
            raise GroupStateRuntimeError("groupstate: cannot set timeout timestamp without event_time timeout")
        if isinstance(timestampMs, bool) or not isinstance(timestampMs, int):
            raise GroupStateTypeError("groupstate: a timeout timestamp is an int of epoch milliseconds")
        if timestampMs <= 0:
            raise GroupStateValueError("groupstate: timeout timestamp must be positive")
        if timestampMs < self._W:
            raise GroupStateValueError(
                f"groupstate: timeout timestamp ({timestampMs}) cannot be earlier than the current watermark ({self._W})")
        if timestampMs > (1 << 63) - 1:
            raise GroupStateValueError("groupstate: timeout timestamp must fit in 64 bits")
        self._timeout = timestampMs

    def getCurrentWatermarkMs(self):
        """The batch's event-time watermark; raises without event_time in the spec."""
        if not _has_watermark:
            raise GroupStateRuntimeError("groupstate: no watermark is defined (configure event_time with a watermark_delay)")
        return self._W

    def getCurrentProcessingTimeMs(self):
        """The batch's processing time (the same for every group of the batch)."""
        return self._T

    def __str__(self):
        return f"GroupState({self.getOption!r})"

    __repr__ = __str__


_new_state = GroupState


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
        c = _json.loads(config_bytes)
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
    files = _groupstate.files()
    spec = files.get("__groupstate_entry__", b"").decode("utf-8")
    module_name, _, func = spec.partition(":")
    if not module_name or not func:
        raise GroupStateRuntimeError("groupstate: the module has no handler entry (build it with groupstate build --lang python)")
    import importlib

    mod = importlib.import_module(module_name)
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
