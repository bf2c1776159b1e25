"""groupstate.stateful_processor: Spark 4's Row-based transformWithState for groupstate (ABI v2).

The names are PySpark's (pyspark.sql.streaming.stateful_processor)::

    from groupstate import StatefulProcessor

    class Counter(StatefulProcessor):
        def init(self, handle):
            self.handle = handle
            self.count = handle.getValueState("count", "count long")   # the schema is optional
            self.seen = handle.getListState("seen", None, ttlDurationMs=60_000)

        def handleInputRows(self, key, rows, timerValues):
            n = (self.count.get() or 0) + sum(1 for _ in rows)
            self.count.update(n)
            self.handle.registerTimer(timerValues.getCurrentProcessingTimeInMs() + 10_000)
            yield {"user_id": key[0], "count": n}

        def handleExpiredTimer(self, key, timerValues, expiredTimerInfo):
            self.count.clear()
            yield {"user_id": key[0], "expired_at": expiredTimerInfo.getExpiryTimeInMs()}

Values (of value state, list elements, map values) are plain Python values stored as JSON;
map keys are strings. Rows are dicts. A schema argument is accepted and not used (the values
are JSON). The glue of the runtime module (sdk/python/runtime/glue.c) calls ``_init_v2`` and
``_process_v2`` with the ABI's buffers (abi/README.md section 9).
"""

import gc as _gc
import struct as _struct

import _groupstate

import groupstate as _gs
from groupstate import GroupStateRuntimeError, GroupStateTypeError, GroupStateValueError
from groupstate import _encode_chunks

__all__ = [
    "StatefulProcessor",
    "StatefulProcessorHandle",
    "ValueState",
    "ListState",
    "MapState",
    "TimerValues",
    "ExpiredTimerInfo",
    "Rows",
]

_U32 = _struct.Struct("<I")
_I64 = _struct.Struct("<q")
_U64 = _struct.Struct("<Q")
_pack_u32, _unpack_u32 = _U32.pack, _U32.unpack_from
_OPVAR = _struct.Struct("<BI")
_OPVARLEN = _struct.Struct("<BII")
_OPI64 = _struct.Struct("<Bq")
_HEADER = _struct.Struct("<Iqq")

_VALUE, _LIST, _MAP = 1, 2, 3
_KIND_NAMES = {_VALUE: "value", _LIST: "list", _MAP: "map"}
_DATA, _TIMERS, _INITIAL = 0, 1, 2
_HAS_WATERMARK, _HAS_INPUTS = 1, 2

_VALUE_GET, _VALUE_SET, _VALUE_CLEAR = 0x01, 0x02, 0x03
_LIST_READ, _LIST_APPEND, _LIST_PUT, _LIST_CLEAR, _LIST_EXISTS = 0x10, 0x11, 0x12, 0x13, 0x14
_MAP_GET, _MAP_CONTAINS, _MAP_SET, _MAP_REMOVE = 0x20, 0x21, 0x22, 0x23
_MAP_READ, _MAP_CLEAR, _MAP_EXISTS = 0x24, 0x25, 0x26
_TIMER_REGISTER, _TIMER_DELETE, _TIMER_LIST = 0x30, 0x31, 0x32

_PAGE_BYTES = 65536
_LOWER = frozenset("abcdefghijklmnopqrstuvwxyz")
_VAR_CHARS = _LOWER | frozenset("0123456789_")
_INPUT_CHARS = _VAR_CHARS | {"-"}


def _valid_name(s, chars, max_len):
    """1 to max_len characters of chars, starting with a-z (no re: it would slow every start)."""
    return isinstance(s, str) and 0 < len(s) <= max_len and s[0] in _LOWER and all(c in chars for c in s)

#: The deployment's input names (its spec's ``inputs:``, in order), or [] with one ``input:``.
inputs = []


class _Malformed(Exception):
    """A malformed buffer or answer from the host."""


def _bytes_at(buf, p):
    (n,) = _U32.unpack_from(buf, p)
    p += 4
    if n > len(buf) - p:
        raise _Malformed("short")
    return buf[p:p + n], p + n


def _encode_value(value, what="state value"):
    if value is None:
        raise GroupStateTypeError("groupstate: null is not a valid state value")
    try:
        return "".join(_encode_chunks(value, 0)).encode("utf-8")
    except (TypeError, ValueError) as e:
        raise GroupStateTypeError(f"groupstate: encoding {what}: {e}") from None


# json's C scanner, as the v1 path decodes (importing json would import re, enum and more at
# every instance's start)
_decode = _gs._loads


def _map_key(key):
    if not isinstance(key, str):
        raise GroupStateTypeError(f"groupstate: a map key is a str, not {type(key).__name__}")
    # surrogateescape: a key that another language wrote as bytes that are not UTF-8 comes
    # back as the same bytes
    return key.encode("utf-8", "surrogateescape")


# ---- the current group ---------------------------------------------------------------------

class _Group:
    __slots__ = ("ops", "fatal", "kind", "timers", "timer_idx", "skip")

    def __init__(self, kind):
        self.ops = bytearray()  # the writes not sent yet
        self.fatal = None  # the host refused a request: the group fails with this
        self.kind = kind
        self.timers = ()
        self.timer_idx = 0
        self.skip = None


_cur = None  # the _Group whose call runs, or None outside calls
_decls = []  # (name, kind, ttl_ms), by index
_declaring = False
_has_timers = False


def _group(what):
    g = _cur
    if g is None:
        raise GroupStateRuntimeError(f"groupstate: {what} used outside a processor's call")
    if g.fatal is not None:
        raise GroupStateRuntimeError(g.fatal)
    return g


def _request(g, read):
    """Sends the group's pending writes with the read op(s) read; returns the answers."""
    mark = len(g.ops)
    g.ops += read
    ans = _groupstate.state(bytes(g.ops), mark)
    g.ops.clear()
    if ans is None:
        g.fatal = "groupstate: the host refused a state request (see the host's log)"
        raise GroupStateRuntimeError(g.fatal)
    return ans


def _bad_answer(g, op):
    g.fatal = f"groupstate: malformed state answer of {op}"
    return GroupStateRuntimeError(g.fatal)


def _flag(g, ans, op):
    if len(ans) != 1 or ans[0] > 1:
        raise _bad_answer(g, op)
    return ans[0] == 1


def _present_value(g, ans, op):
    """A `present` u8 and, when 1, a byte string: the decoded value, or (False, None)."""
    if not ans or ans[0] > 1:
        raise _bad_answer(g, op)
    if ans[0] == 0:
        if len(ans) != 1:
            raise _bad_answer(g, op)
        return False, None
    try:
        v, p = _bytes_at(ans, 1)
    except (_Malformed, _struct.error):
        raise _bad_answer(g, op) from None
    if p != len(ans):
        raise _bad_answer(g, op)
    return True, _decode(v)


# ---- state variables -----------------------------------------------------------------------

class _Var:
    __slots__ = ("_idx", "_name", "_kind")

    def __init__(self, idx, name, kind):
        self._idx = idx
        self._name = name
        self._kind = kind

    def _g(self):
        g = _cur
        if g is None or g.fatal is not None:  # the error's text is made only when needed
            return _group(f"{_KIND_NAMES[self._kind]} state {self._name}")
        return g

    def __repr__(self):
        return f"{type(self).__name__}({self._name!r})"


class ValueState(_Var):
    """A single value of the key (PySpark's ValueState)."""

    __slots__ = ()

    def exists(self):
        """Whether the key has a value."""
        g = self._g()
        return _present_value(g, _request(g, _OPVAR.pack(_VALUE_GET, self._idx)), "VALUE_GET")[0]

    def get(self):
        """The value, or None when there is none."""
        g = self._g()
        return _present_value(g, _request(g, _OPVAR.pack(_VALUE_GET, self._idx)), "VALUE_GET")[1]

    def update(self, newValue):
        """Sets the value (None is refused: GroupStateTypeError)."""
        g = self._g()
        b = _encode_value(newValue)
        g.ops += _OPVARLEN.pack(_VALUE_SET, self._idx, len(b))
        g.ops += b

    def clear(self):
        """Removes the value."""
        self._g().ops += _OPVAR.pack(_VALUE_CLEAR, self._idx)


class ListState(_Var):
    """A list of values of the key (PySpark's ListState); read in pages, appended to in one op."""

    __slots__ = ()

    def exists(self):
        """Whether the list has elements."""
        g = self._g()
        return _flag(g, _request(g, _OPVAR.pack(_LIST_EXISTS, self._idx)), "LIST_EXISTS")

    def get(self):
        """An iterator over the elements, in order (an empty one when there are none)."""
        g = self._g()
        cursor = 0
        while True:
            ans = _request(g, _OPVAR.pack(_LIST_READ, self._idx) + _U64.pack(cursor) + _U32.pack(_PAGE_BYTES))
            try:
                (count,) = _U32.unpack_from(ans, 0)
                p = 4
                elems = []
                for _ in range(count):
                    e, p = _bytes_at(ans, p)
                    elems.append(e)
                (nxt,) = _U64.unpack_from(ans, p)
                p += 8
            except (_Malformed, _struct.error):
                raise _bad_answer(g, "LIST_READ") from None
            if p != len(ans) or (count == 0 and nxt != 0):
                raise _bad_answer(g, "LIST_READ")
            for e in elems:
                yield _decode(e)
            if nxt == 0:
                return
            cursor = nxt
            g = self._g()

    def _write(self, op, values):
        g = self._g()
        bs = [_encode_value(v) for v in values]
        parts = [_OPVARLEN.pack(op, self._idx, len(bs))]
        for b in bs:
            parts.append(_U32.pack(len(b)))
            parts.append(b)
        g.ops += b"".join(parts)

    def put(self, newState):
        """Replaces the list with the values of newState (a list)."""
        self._write(_LIST_PUT, list(newState))

    def appendValue(self, newState):
        """Appends one value."""
        self._write(_LIST_APPEND, (newState,))

    def appendList(self, newState):
        """Appends the values of newState (a list)."""
        values = list(newState)
        if values:
            self._write(_LIST_APPEND, values)
        else:
            self._g()

    def clear(self):
        """Removes every element."""
        self._g().ops += _OPVAR.pack(_LIST_CLEAR, self._idx)


class MapState(_Var):
    """A map of the key from str keys to values (PySpark's MapState); keys in bytewise UTF-8
    order."""

    __slots__ = ()

    def _key_op(self, op, key):
        k = _map_key(key)
        return _OPVARLEN.pack(op, self._idx, len(k)) + k

    def exists(self):
        """Whether the map has entries."""
        g = self._g()
        return _flag(g, _request(g, _OPVAR.pack(_MAP_EXISTS, self._idx)), "MAP_EXISTS")

    def getValue(self, key):
        """The value of key, or None when the map has no such key."""
        g = self._g()
        return _present_value(g, _request(g, self._key_op(_MAP_GET, key)), "MAP_GET")[1]

    def containsKey(self, key):
        """Whether the map has key."""
        g = self._g()
        return _flag(g, _request(g, self._key_op(_MAP_CONTAINS, key)), "MAP_CONTAINS")

    def updateValue(self, key, value):
        """Sets key to value (None is refused: GroupStateTypeError)."""
        g = self._g()
        op = self._key_op(_MAP_SET, key)
        b = _encode_value(value)
        g.ops += op
        g.ops += _U32.pack(len(b))
        g.ops += b

    def removeKey(self, key):
        """Removes key."""
        g = self._g()
        g.ops += self._key_op(_MAP_REMOVE, key)

    def iterator(self):
        """An iterator over (key, value) pairs in key order."""
        g = self._g()
        cursor = b""
        while True:
            ans = _request(g, _OPVARLEN.pack(_MAP_READ, self._idx, len(cursor)) + cursor + _U32.pack(_PAGE_BYTES))
            try:
                (count,) = _U32.unpack_from(ans, 0)
                p = 4
                entries = []
                prev = None
                for _ in range(count):
                    k, p = _bytes_at(ans, p)
                    v, p = _bytes_at(ans, p)
                    if prev is not None and k <= prev:
                        raise _Malformed("order")
                    prev = k
                    entries.append((k, v))
                if p >= len(ans) or ans[p] > 1:
                    raise _Malformed("more")
                more = ans[p] == 1
                nxt, p = _bytes_at(ans, p + 1)
            except (_Malformed, _struct.error):
                raise _bad_answer(g, "MAP_READ") from None
            if p != len(ans) or (count == 0 and more) or (not more and nxt):
                raise _bad_answer(g, "MAP_READ")
            for k, v in entries:
                yield k.decode("utf-8", "surrogateescape"), _decode(v)
            if not more:
                return
            cursor = nxt
            g = self._g()

    def keys(self):
        """An iterator over the keys in order."""
        for k, _ in self.iterator():
            yield k

    def values(self):
        """An iterator over the values in key order."""
        for _, v in self.iterator():
            yield v

    def clear(self):
        """Removes every entry."""
        self._g().ops += _OPVAR.pack(_MAP_CLEAR, self._idx)


# ---- the handle, timers, rows --------------------------------------------------------------

def _ttl(ttlDurationMs):
    if ttlDurationMs is None:
        return 0
    if isinstance(ttlDurationMs, bool) or not isinstance(ttlDurationMs, (int, str)):
        raise GroupStateTypeError("groupstate: ttlDurationMs is an int of milliseconds or a duration string such as \"10s\"")
    ms = _gs.parse_duration_ms(ttlDurationMs)
    if ms <= 0:
        raise GroupStateValueError("groupstate: ttlDurationMs must be positive")
    return ms


class StatefulProcessorHandle:
    """What a processor's init gets (PySpark's StatefulProcessorHandle): it declares the state
    variables (in init only) and manages the current key's timers (in calls only)."""

    def _declare(self, fn, stateName, kind, ttlDurationMs):
        if not _declaring:
            raise GroupStateRuntimeError(f"groupstate: {fn}({stateName!r}) outside the processor's init")
        if not _valid_name(stateName, _VAR_CHARS, 64):
            raise GroupStateValueError(
                f"groupstate: {fn}({stateName!r}): a name is 1-64 characters of a-z, 0-9 and _, starting with a letter a-z")
        for d in _decls:
            if d[0] == stateName:
                raise GroupStateValueError(f"groupstate: {fn}({stateName!r}): declared twice")
        if len(_decls) >= 256:
            raise GroupStateValueError(f"groupstate: {fn}({stateName!r}): more than 256 state variables")
        _decls.append((stateName, kind, _ttl(ttlDurationMs)))
        return len(_decls) - 1

    def getValueState(self, stateName, schema=None, ttlDurationMs=None):
        """Declares the value state stateName (schema is accepted and not used: values are
        JSON); ttlDurationMs (or a duration string) expires it that long after each write."""
        return ValueState(self._declare("getValueState", stateName, _VALUE, ttlDurationMs), stateName, _VALUE)

    def getListState(self, stateName, schema=None, ttlDurationMs=None):
        """Declares the list state stateName; with ttlDurationMs each element expires that long
        after it was written."""
        return ListState(self._declare("getListState", stateName, _LIST, ttlDurationMs), stateName, _LIST)

    def getMapState(self, stateName, userKeySchema=None, valueSchema=None, ttlDurationMs=None):
        """Declares the map state stateName (str keys); with ttlDurationMs each entry expires
        that long after it was written."""
        return MapState(self._declare("getMapState", stateName, _MAP, ttlDurationMs), stateName, _MAP)

    def registerTimer(self, expiryTimestampMs):
        """Registers a timer of the current key at expiryTimestampMs (processing time or event
        time, as the deployment's timeout mode says); registering it twice keeps one."""
        g = self._timer_group("registerTimer")
        g.ops += _OPI64.pack(_TIMER_REGISTER, self._ts(expiryTimestampMs))

    def deleteTimer(self, expiryTimestampMs):
        """Deletes the current key's timer at expiryTimestampMs (none there: nothing happens);
        a later timer of the same expiry call does not fire."""
        g = self._timer_group("deleteTimer")
        ts = self._ts(expiryTimestampMs)
        g.ops += _OPI64.pack(_TIMER_DELETE, ts)
        if g.kind == _TIMERS:
            for j in range(g.timer_idx + 1, len(g.timers)):
                if g.timers[j] == ts:
                    g.skip.add(j)

    def listTimers(self):
        """An iterator over the current key's timers, ascending (none under timeout none)."""
        if not _has_timers:
            _group("listTimers")
            return iter(())
        g = _group("listTimers")
        ans = _request(g, bytes((_TIMER_LIST,)))
        try:
            (count,) = _U32.unpack_from(ans, 0)
            if len(ans) != 4 + 8 * count:
                raise _Malformed("size")
            ts = list(_struct.unpack_from(f"<{count}q", ans, 4))
        except (_Malformed, _struct.error):
            raise _bad_answer(g, "TIMER_LIST") from None
        if any(ts[i] <= ts[i - 1] for i in range(1, len(ts))):
            raise _bad_answer(g, "TIMER_LIST")
        return iter(ts)

    def deleteIfExists(self, stateName):
        """Clears the declared variable stateName, of any kind."""
        g = _group("deleteIfExists")
        for i, d in enumerate(_decls):
            if d[0] == stateName:
                g.ops += _OPVAR.pack({_VALUE: _VALUE_CLEAR, _LIST: _LIST_CLEAR, _MAP: _MAP_CLEAR}[d[1]], i)
                return
        raise GroupStateValueError(f"groupstate: deleteIfExists({stateName!r}): no such state variable")

    def getQueryInfo(self):
        """Not supported: raises GroupStateRuntimeError. Spark's QueryInfo has a query id, a
        run id and a batch id; the ABI hands a module none of them (its deployment's name is
        groupstate.deployment)."""
        raise GroupStateRuntimeError(
            "groupstate: getQueryInfo is not supported: the runtime gives a module no query, run or "
            "batch id (groupstate.deployment is the deployment's name)")

    @property
    def inputs(self):
        """The deployment's input names (spec inputs:), or [] with one input."""
        return list(inputs)

    def _timer_group(self, fn):
        g = _group(fn)
        if not _has_timers:
            raise GroupStateRuntimeError("groupstate: timers need timeout processing_time or event_time in the deployment spec")
        return g

    @staticmethod
    def _ts(ts):
        if isinstance(ts, bool) or not isinstance(ts, int):
            raise GroupStateTypeError("groupstate: a timer is an int of epoch milliseconds")
        if not -(1 << 63) <= ts < (1 << 63):
            raise GroupStateValueError("groupstate: a timer must fit in 64 bits")
        return ts


class TimerValues:
    """The batch's times (PySpark's TimerValues)."""

    __slots__ = ("_T", "_W")

    def __init__(self, processing_time_ms, watermark_ms):
        self._T = processing_time_ms
        self._W = watermark_ms

    def getCurrentProcessingTimeInMs(self):
        """The batch's processing time (the same for every key of the batch)."""
        return self._T

    def getCurrentWatermarkInMs(self):
        """The batch's event-time watermark (0 without event_time)."""
        return self._W


class ExpiredTimerInfo:
    """The timer of a handleExpiredTimer call (PySpark's ExpiredTimerInfo)."""

    __slots__ = ("_ts",)

    def __init__(self, ts):
        self._ts = ts

    def getExpiryTimeInMs(self):
        """The timer's timestamp."""
        return self._ts


class Rows:
    """The rows of a handleInputRows call: an iterator over dicts in arrival order. With
    several inputs (spec inputs:), ``input`` is the name of the input of the row last returned
    ("" with one input), and ``withInputs()`` iterates (input name, row) pairs."""

    __slots__ = ("_rows", "_i", "input")

    def __init__(self, rows):
        self._rows = rows  # (input index, raw bytes)
        self._i = 0
        self.input = ""

    def __iter__(self):
        return self

    def __next__(self):
        i = self._i
        if i >= len(self._rows):
            raise StopIteration
        self._i = i + 1
        idx, raw = self._rows[i]
        self.input = inputs[idx] if inputs else ""
        return _decode(raw)

    def __len__(self):
        """The rows not returned yet."""
        return len(self._rows) - self._i

    def withInputs(self):
        """An iterator over (input name, row) pairs."""
        for row in self:
            yield self.input, row


class StatefulProcessor:
    """A transformWithState processor (PySpark's StatefulProcessor, Row-based): subclass it,
    declare the state variables in init, and handle the key's rows and timers. Methods that
    emit rows yield dicts (or return a list of them, or None)."""

    def init(self, handle):
        """Declares the state variables (handle.getValueState, ...): once per instance."""

    def handleInputRows(self, key, rows, timerValues):
        """Called for a key's rows of a batch (rows: an iterator over dicts); yields output
        rows."""
        raise NotImplementedError("groupstate: the processor does not implement handleInputRows")

    def handleExpiredTimer(self, key, timerValues, expiredTimerInfo):
        """Called for each of a key's expired timers, in order; yields output rows. The
        default, as PySpark's, emits nothing."""
        return None

    def handleInitialState(self, key, initialState, timerValues):
        """Called once per key of the deployment's initial state (groupstate deploy
        --initial-state) with the key's line's object, before any row. The default sets each
        declared variable named in it: a value to its value, a list to the elements of its
        array, a map to the entries of its object (null: left alone)."""
        _apply_initial(initialState)

    def close(self):
        """Never called by groupstate (PySpark's signature, kept so that code ports): an
        instance lives across batches until the runtime drops it without notice (the ABI has
        no shutdown export), and keeps nothing outside its state."""


def _apply_initial(initial):
    if not isinstance(initial, dict):
        raise GroupStateValueError(f"groupstate: initial state is not a JSON object of state variables: {initial!r}")
    names = {d[0]: i for i, d in enumerate(_decls)}
    unknown = sorted(k for k in initial if k not in names)
    if unknown:
        raise GroupStateValueError(
            f"groupstate: initial state names undeclared state variables {unknown} "
            f"(declared: {', '.join(d[0] for d in _decls)})")
    g = _group("the initial state")
    for i, (name, kind, _) in enumerate(_decls):
        v = initial.get(name)
        if v is None:
            continue
        if kind == _VALUE:
            b = _encode_value(v, f"initial state of {name}")
            g.ops += _OPVARLEN.pack(_VALUE_SET, i, len(b)) + b
        elif kind == _LIST:
            if not isinstance(v, list):
                raise GroupStateValueError(f"groupstate: initial state of list {name}: want a JSON array, got {v!r}")
            bs = [_encode_value(e, f"initial state of list {name}") for e in v]
            g.ops += _OPVARLEN.pack(_LIST_PUT, i, len(bs))
            for b in bs:
                g.ops += _U32.pack(len(b)) + b
        else:
            if not isinstance(v, dict):
                raise GroupStateValueError(f"groupstate: initial state of map {name}: want a JSON object, got {v!r}")
            g.ops += _OPVAR.pack(_MAP_CLEAR, i)
            for k in sorted(v, key=lambda s: s.encode("utf-8", "surrogateescape")):
                kb = _map_key(k)
                b = _encode_value(v[k], f"initial state of map {name}")
                g.ops += _OPVARLEN.pack(_MAP_SET, i, len(kb)) + kb + _U32.pack(len(b)) + b


# ---- the glue's entry points ---------------------------------------------------------------

_processor = None

#: Whether the glue runs calls of DATA groups itself (in C, as _process_v2 would: glue.c,
#: v2_process_data) rather than through _process_v2. Tests set it to False to compare.
_c_data_calls = True


def _init_v2(buf):
    """gs_init of a v2 module (the version checked by the glue): parses the init buffer
    (abi/README.md 4.1, 9.3a), imports the handler, runs the processor's init and returns the
    declarations of 9.2 (var_count and the variables)."""
    global inputs, _processor, _declaring, _has_timers
    try:
        _version, mode, flags = _struct.unpack_from("<III", buf, 0)
        if flags & ~(_HAS_WATERMARK | _HAS_INPUTS):
            raise GroupStateValueError(
                f"groupstate: host sets init flags {flags & ~(_HAS_WATERMARK | _HAS_INPUTS):#x} this SDK does not implement (rebuild with a newer SDK)")
        name, p = _bytes_at(buf, 12)
        config, p = _bytes_at(buf, p)
        names = []
        if flags & _HAS_INPUTS:
            (n,) = _U32.unpack_from(buf, p)
            p += 4
            if n == 0 or n > 16:
                raise GroupStateValueError(f"groupstate: init buffer malformed: input_count {n} (want 1 to 16)")
            for i in range(n):
                b, p = _bytes_at(buf, p)
                s = b.decode("utf-8", "replace")
                if not _valid_name(s, _INPUT_CHARS, 32):
                    raise GroupStateValueError(f"groupstate: init buffer malformed: input {i}: name {s!r} is not 1-32 of a-z, 0-9, _ and - starting with a-z")
                if s in names:
                    raise GroupStateValueError(f"groupstate: init buffer malformed: input {i}: name {s!r} already used by input {names.index(s)}")
                names.append(s)
        if p != len(buf):
            raise _Malformed("trailing bytes")
    except (_Malformed, _struct.error):
        raise GroupStateValueError("groupstate: init buffer malformed") from None
    inputs = names
    _has_timers = mode != 0
    cls = _gs._init(name, config, mode, flags & _HAS_WATERMARK, want_class=True)
    if not (isinstance(cls, type) and issubclass(cls, StatefulProcessor)):
        raise GroupStateTypeError(
            f"groupstate: the entry {getattr(cls, '__name__', cls)!r} is not a StatefulProcessor subclass "
            "(from groupstate import StatefulProcessor)")
    processor = cls()
    _decls.clear()
    _declaring = True
    try:
        processor.init(StatefulProcessorHandle())
    finally:
        _declaring = False
    _processor = processor
    # What the start made (the SDK, the handler's modules, the processor) lives as long as
    # the instance: out of the collector's sight, a collection walks only the calls' objects.
    _gc.freeze()
    parts = [_U32.pack(len(_decls))]
    for vname, kind, ttl in _decls:
        b = vname.encode("ascii")
        parts.append(_U32.pack(len(b)) + b + _U32.pack(kind) + _I64.pack(ttl))
    return b"".join(parts)


def _emit(result, parts):
    """Appends the encoded output rows of a call's result; returns their count."""
    if result is None:
        return 0
    if isinstance(result, (dict, str, bytes)):
        raise GroupStateTypeError(
            f"groupstate: the processor returned a {type(result).__name__}; yield output rows, or return a list of them")
    n = 0
    for row in result:
        try:
            b = "".join(_encode_chunks(row, 0)).encode("utf-8")
        except (TypeError, ValueError) as e:
            raise GroupStateTypeError(f"groupstate: encoding an output row: {e}") from None
        parts += (_pack_u32(len(b)), b)
        n += 1
    return n


def _without_sdk_frames(e):
    """e with its traceback starting at the first frame outside this module (the calls of
    _process_v2 and _emit are not the handler's), or none when every frame is this module's (an
    error of the SDK's own, such as an output row json cannot encode: its message says it all,
    and the glue's C path, which has no such frames, writes the same text)."""
    tb = e.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename == _THIS_FILE:
        tb = tb.tb_next
    return e.with_traceback(tb)


_THIS_FILE = "groupstate/stateful_processor.py"


def _malformed(i, why):
    m = f"groupstate: process buffer malformed at group {i}: {why}".encode("utf-8")
    return _U32.pack(1) + _U32.pack(len(m)) + m


def _process_v2(buf):
    """gs_process of a v2 module: parses the process buffer (abi/README.md 9.3), runs the
    processor for each group and returns the result buffer (9.6), or a whole-call error (4.5)
    when the buffer is malformed."""
    global _cur
    if _processor is None:
        m = b"groupstate: process called before a successful init"
        return _U32.pack(1) + _U32.pack(len(m)) + m
    try:
        count, T, W = _HEADER.unpack_from(buf, 0)
    except _struct.error:
        m = b"groupstate: process buffer malformed: short header"
        return _U32.pack(1) + _U32.pack(len(m)) + m
    p = _HEADER.size
    tv = TimerValues(T, W)
    out = [_U32.pack(0), _U32.pack(count)]
    first_kind = None
    ninputs = len(inputs)
    proc = _processor
    size = len(buf)
    for i in range(count):
        try:
            (kind,) = _U32.unpack_from(buf, p)
            key_raw, p = _bytes_at(buf, p + 4)
            if kind > _INITIAL:
                return _malformed(i, "unknown kind")
            if first_kind is None:
                first_kind = kind
            elif kind != first_kind:
                return _malformed(i, "groups of different kinds")
            if kind == _DATA:
                (n,) = _U32.unpack_from(buf, p)
                p += 4
                if n == 0:
                    return _malformed(i, "a DATA group without rows")
                rows = []
                for k in range(n):
                    idx = 0
                    if ninputs:
                        (idx,) = _unpack_u32(buf, p)
                        p += 4
                        if idx >= ninputs:
                            return _malformed(i, f"row {k}: input index {idx} out of range (the deployment has {ninputs} inputs)")
                    (m,) = _unpack_u32(buf, p)  # _bytes_at, inline: once per row
                    p += 4
                    if m > size - p:
                        raise _Malformed("short")
                    rows.append((idx, buf[p:p + m]))
                    p += m
            elif kind == _TIMERS:
                (n,) = _U32.unpack_from(buf, p)
                p += 4
                if n == 0:
                    return _malformed(i, "a TIMERS group without timers")
                if 8 * n > len(buf) - p:
                    return _malformed(i, "short")
                timers = _struct.unpack_from(f"<{n}q", buf, p)
                p += 8 * n
                if any(timers[k] <= timers[k - 1] for k in range(1, n)):
                    return _malformed(i, "timers out of order")
            else:
                initial_raw, p = _bytes_at(buf, p)
        except (_Malformed, _struct.error):
            return _malformed(i, "short")
        g = _Group(kind)
        _groupstate.group_begin(i)
        _cur = g
        parts = []
        emits = 0
        try:
            key = (_decode(key_raw),)
            if kind == _DATA:
                emits = _emit(proc.handleInputRows(key, Rows(rows), tv), parts)
            elif kind == _TIMERS:
                g.timers = timers
                g.skip = set()
                for k, ts in enumerate(timers):
                    if k in g.skip:
                        continue
                    g.timer_idx = k
                    emits += _emit(proc.handleExpiredTimer(key, tv, ExpiredTimerInfo(ts)), parts)
            else:
                emits = _emit(proc.handleInitialState(key, _decode(initial_raw), tv), parts)
            err = g.fatal
        except BaseException as e:  # SystemExit too: one group fails, not the instance
            err = g.fatal or _gs._format_exception(_without_sdk_frames(e))
        finally:
            _cur = None
        if err is None:
            out.append(_pack_u32(emits))
            out += parts
            out += (b"\0\0\0\0\0\0\0\0", _pack_u32(len(g.ops)), bytes(g.ops))  # status 0, error "", the writes
        else:
            m = err[-8192:].encode("utf-8", "replace")  # the end: the exception is last
            out.append(_U32.pack(0) + _U32.pack(1) + _U32.pack(len(m)) + m + _U32.pack(0))
    if p != len(buf):
        m = b"groupstate: trailing bytes in process buffer"
        return _U32.pack(1) + _U32.pack(len(m)) + m
    return b"".join(out)
