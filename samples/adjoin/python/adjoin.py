"""adjoin, in Python: the stream-stream join sample (ABI v2, a deployment with two inputs). It
joins ad impressions with the clicks on them, a click at c matching an impression at i of the
same ad when i <= c <= i + within, emits each pair once, and emits an impression that no click
matched with click_ts null once the watermark has passed i + within (a left outer join).
Behaves exactly like samples/adjoin/go; ../README.md has the rules and the scenario.

Build: groupstate build --lang python samples/adjoin/python/adjoin.py
"""
import groupstate
from groupstate import StatefulProcessor

IMPRESSIONS, CLICKS = "impressions", "clicks"


def row_ts(row):
    """The row's ts in epoch milliseconds: a JSON number (the runtime also reads RFC 3339
    strings as event times, but this handler wants numbers)."""
    ts = row.get("ts")
    if ts is None:
        raise ValueError("no ts")
    if isinstance(ts, bool) or not isinstance(ts, (int, float)):
        raise ValueError(f"ts {ts!r} is not a number")
    return int(ts)


class Adjoin(StatefulProcessor):
    """Each side's rows wait in a list until the watermark has passed the last time a row of
    the other side could match them."""

    def init(self, handle):
        within = groupstate.config_duration_ms("within")
        if within is None or within <= 0:
            raise ValueError("adjoin: config within must be a positive duration")
        self.within = within
        if sorted(handle.inputs) != sorted([IMPRESSIONS, CLICKS]):
            raise ValueError(f"adjoin: the spec's inputs must be {IMPRESSIONS} and {CLICKS}, got {handle.inputs}")
        self.handle = handle
        self.impressions = handle.getListState("impressions", "ts long, matched boolean")
        self.clicks = handle.getListState("clicks", "ts long")

    def handleInputRows(self, key, rows, timerValues):
        """Joins each row, in order, with the other side's buffered rows, then buffers it until
        the watermark passes the last time it could match: an impression at i until i +
        within, a click at c until c."""
        imps, clicks = list(self.impressions.get()), list(self.clicks.get())
        buffered, buffered_clicks = len(imps), len(clicks)
        marked = False  # an impression buffered before this call was matched by a click of it
        for n, (source, row) in enumerate(rows.withInputs()):
            try:
                ts = row_ts(row)
            except ValueError as e:
                raise ValueError(f"adjoin: row {n} ({source}): {e}") from None
            if source == IMPRESSIONS:
                matched = False
                for c in clicks:
                    if ts <= c <= ts + self.within:
                        yield {"ad_id": key[0], "impression_ts": ts, "click_ts": c}
                        matched = True
                imps.append({"ts": ts, "matched": matched})
                self.handle.registerTimer(ts + self.within)
            elif source == CLICKS:
                for k, imp in enumerate(imps):
                    if imp["ts"] <= ts <= imp["ts"] + self.within:
                        yield {"ad_id": key[0], "impression_ts": imp["ts"], "click_ts": ts}
                        marked = marked or (k < buffered and not imp["matched"])
                        imp["matched"] = True
                clicks.append(ts)
                self.handle.registerTimer(ts)
            else:
                raise ValueError(f"adjoin: row {n} comes from unknown input {source!r}")
        store(self.impressions, imps, buffered, marked)
        store(self.clicks, clicks, buffered_clicks, False)

    def handleExpiredTimer(self, key, timerValues, expiredTimerInfo):
        """Evicts what no row can match any more, now that the watermark has passed the timer:
        the impressions with i + within <= t (one that no click matched is emitted with
        click_ts null) and the clicks with c <= t (dropped)."""
        t = expiredTimerInfo.getExpiryTimeInMs()
        imps, clicks = list(self.impressions.get()), list(self.clicks.get())
        keep = []
        for imp in imps:
            if imp["ts"] + self.within > t:
                keep.append(imp)
            elif not imp["matched"]:
                yield {"ad_id": key[0], "impression_ts": imp["ts"], "click_ts": None}
        kept_clicks = [c for c in clicks if c > t]
        store(self.impressions, keep, len(imps), len(keep) != len(imps))
        store(self.clicks, kept_clicks, len(clicks), len(kept_clicks) != len(clicks))

    def close(self):
        pass


def store(state, values, kept, changed):
    """Writes a list back when the call changed it: the values from its first `kept` on are
    appended when the ones before are unchanged (one op), else the list is written whole; an
    empty list is cleared, so a key whose rows have all been evicted holds no state."""
    if not values:
        if kept > 0 or changed:
            state.clear()
    elif changed:
        state.put(values)
    elif len(values) > kept:
        state.appendList(values[kept:])
