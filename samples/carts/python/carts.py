"""carts, in Python: the transformWithState sample (ABI v2), a shopping cart per user with a map
of items, a list of recent events that expire by TTL, an abandon timer that every activity
moves and one reminder per cart. Behaves exactly like samples/carts/go; ../README.md has the
rules and the scenario.

Build: groupstate build --lang python samples/carts/python/carts.py
(the class below, a StatefulProcessor subclass, makes it an ABI v2 module).
"""
import groupstate
from groupstate import StatefulProcessor


def positive_duration_ms(field):
    ms = groupstate.config_duration_ms(field)
    if ms is None or ms <= 0:
        raise ValueError(f"carts: config {field} must be a positive duration")
    return ms


class Carts(StatefulProcessor):
    def init(self, handle):
        self.handle = handle
        self.abandon_after = positive_duration_ms("abandon_after")
        self.remind_after = positive_duration_ms("remind_after")
        history_ttl = positive_duration_ms("history_ttl")
        self.items = handle.getMapState("items", "item string", "qty long, price double")
        self.history = handle.getListState("history", "event string", ttlDurationMs=history_ttl)
        self.abandon_at = handle.getValueState("abandon_at", "ts long")
        self.remind_at = handle.getValueState("remind_at", "ts long")

    def handleInputRows(self, key, rows, timerValues):
        """Applies the rows in arrival order, then moves the abandon timer and sets the
        reminder of a cart that has items."""
        for e in rows:
            event = e.get("event")
            self.history.appendValue(event)
            if event == "add":
                line = self.items.getValue(e["item"]) or {"qty": 0, "price": 0}
                line["qty"] += e.get("qty", 0)
                line["price"] = e.get("price", 0)
                self.items.updateValue(e["item"], line)
            elif event == "remove":
                line = self.items.getValue(e["item"])
                if line is None:
                    continue
                line["qty"] -= e.get("qty", 0)
                if line["qty"] <= 0:
                    self.items.removeKey(e["item"])
                else:
                    self.items.updateValue(e["item"], line)
            elif event == "checkout":
                yield self.summary(key, "checkout", True)
                self.clear()
            else:
                raise ValueError(f"carts: unknown event {event!r}")
        if not self.items.exists():
            return  # an empty cart keeps the timers it has
        now = timerValues.getCurrentProcessingTimeInMs()
        old = self.abandon_at.get()
        if old is not None:
            self.handle.deleteTimer(old)
        self.handle.registerTimer(now + self.abandon_after)
        self.abandon_at.update(now + self.abandon_after)
        if self.remind_at.exists():
            return  # one reminder per cart: later activity does not move it
        self.handle.registerTimer(now + self.remind_after)
        self.remind_at.update(now + self.remind_after)

    def handleExpiredTimer(self, key, timerValues, expiredTimerInfo):
        """Abandons the cart (its abandon timer) or reminds the user (its reminder, after
        which remind_at stays set: one reminder per cart)."""
        ts = expiredTimerInfo.getExpiryTimeInMs()
        if self.abandon_at.get() == ts:
            yield self.summary(key, "abandoned", True)
            self.clear()
        elif self.remind_at.get() == ts:
            yield self.summary(key, "reminder", False)

    def summary(self, key, what, events):
        """The cart's output row: its distinct items and total, and with events the number of
        its live history entries."""
        out = {"user_id": key[0], "event": what, "items": 0, "total": 0.0}
        for line in self.items.values():
            out["items"] += 1
            out["total"] += line["qty"] * line["price"]
        if events:
            out["events"] = sum(1 for _ in self.history.get())
        return out

    def clear(self):
        """Empties every variable and deletes every timer."""
        self.items.clear()
        self.history.clear()
        self.abandon_at.clear()
        self.remind_at.clear()
        for ts in self.handle.listTimers():
            self.handle.deleteTimer(ts)

    def close(self):
        pass
