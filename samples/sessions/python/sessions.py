"""sessions, in Python: sessionizes each user's clicks by event time with a gap of
config.gap (default 5s) and emits a session when the watermark passes its end plus the gap.
Behaves exactly like samples/sessions/go.

Build: groupstate build --lang python sessions.py
"""
import calendar
import re

import groupstate

gap_ms = groupstate.config_duration_ms("gap")
if gap_ms is None:
    gap_ms = 5000
elif gap_ms <= 0:
    raise ValueError("sessions: config.gap must be at least 1ms")

_RFC3339 = re.compile(r"(\d{4})-(\d\d)-(\d\d)[Tt](\d\d):(\d\d):(\d\d)(?:\.(\d+))?([Zz]|[+-]\d\d:\d\d)\Z")


def event_time(ts):
    """ts in epoch milliseconds: a number (truncated toward zero) or an RFC 3339 string."""
    if isinstance(ts, str):
        m = _RFC3339.match(ts)
        if not m:
            raise ValueError("ts: want epoch milliseconds or an RFC 3339 string, got " + ts)
        y, mo, d, h, mi, s, frac, off = m.groups()
        secs = calendar.timegm((int(y), int(mo), int(d), int(h), int(mi), int(s)))
        if off not in ("Z", "z"):
            sign = 1 if off[0] == "+" else -1
            secs -= sign * (int(off[1:3]) * 3600 + int(off[4:6]) * 60)
        return secs * 1000 + int((frac or "0")[:3].ljust(3, "0"))
    if isinstance(ts, bool) or not isinstance(ts, (int, float)):
        raise ValueError("ts: want epoch milliseconds or an RFC 3339 string, got " + repr(ts))
    return int(ts)


def closed(key, s):
    return {"user_id": key[0], "start": s["start"], "end": s["end"], "events": s["events"]}


def handle(key, rows, state):
    s = state.getOption
    if state.hasTimedOut:
        if s is not None:
            yield closed(key, s)
        state.remove()
        return
    for t in sorted(event_time(r["ts"]) for chunk in rows for r in chunk):
        if s is None:
            s = {"start": t, "end": t, "events": 1}
        elif t > s["end"] + gap_ms:
            yield closed(key, s)
            s = {"start": t, "end": t, "events": 1}
        else:
            s = {"start": min(s["start"], t), "end": max(s["end"], t), "events": s["events"] + 1}
    if s is None:
        return
    state.update(s)
    timeout = s["end"] + gap_ms
    try:
        w = state.getCurrentWatermarkMs()
    except RuntimeError:
        w = None
    if w is not None and timeout < w:
        timeout = w
    state.setTimeoutTimestamp(timeout)
