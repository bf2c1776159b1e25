// carts, the transformWithState sample (ABI v2): a shopping cart per user, with a map of
// items, a list of recent events that expire by TTL, an abandon timer that every activity
// moves and one reminder per cart. Behaves exactly like samples/carts/go (../README.md has
// the rules and the scenario).
//
// Build (from the repository root; `make samples-assemblyscript` runs the same):
//
//   sdk/assemblyscript/node_modules/.bin/asc samples/carts/assemblyscript/carts.ts -o samples/carts/assemblyscript/carts.wasm --runtime minimal --exportStart _initialize --use abort=__gs_abort -O3

import { Config, JsonObject, JsonWriter, quote } from "../../../sdk/assemblyscript/assembly/index";
import { decodeString } from "../../../sdk/assemblyscript/assembly/json";
import {
  StatefulProcessor, ProcessorHandle, Call, ValueState, ListState, MapState, registerProcessor,
} from "../../../sdk/assemblyscript/assembly/processor";
export * from "../../../sdk/assemblyscript/assembly/exports-v2";

// config.<field> as a positive duration, in nanoseconds (0 after a failure).
function positiveDuration(c: Config, field: string): i64 {
  const absent: i64 = -1;
  const ns = c.durationNs(field, absent);
  if (c.error !== null) return 0;
  if (ns <= 0) { c.fail("carts: config " + field + " must be a positive duration"); return 0; }
  return ns;
}

// An input row: {"event", "item", "qty", "price"}, decoded as Go's encoding/json does into the
// Go sample's struct (names matched case-insensitively, the last one wins, null is nothing, a
// value of the wrong type is an error).
class Event {
  event: string = "";
  item: string = "";
  qty: i64 = 0;
  price: f64 = 0;
}

function lower(s: string): string {
  let out = "";
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    out += String.fromCharCode(c >= 0x41 && c <= 0x5a ? c + 32 : c);
  }
  return out;
}

// An integer literal as an i64, or false when raw is not one or is out of range.
let parsedInt: i64 = 0;
function parseInt64(raw: string): bool {
  let i = 0;
  const neg = raw.length > 0 && raw.charCodeAt(0) == 0x2d;
  if (neg) i++;
  if (i == raw.length) return false;
  let v: u64 = 0;
  for (; i < raw.length; i++) {
    const c = raw.charCodeAt(i);
    if (c < 0x30 || c > 0x39) return false;
    const d = <u64>(c - 0x30);
    if (v > (0xFFFFFFFFFFFFFFFF - d) / 10) return false;
    v = v * 10 + d;
  }
  if (neg ? v > 0x8000000000000000 : v > 0x7FFFFFFFFFFFFFFF) return false;
  parsedInt = neg ? <i64>(0 - v) : <i64>v;
  return true;
}

// Decodes row i into e; false (the call failed) when it does not decode.
function readEvent(c: Call, i: i32, e: Event): bool {
  const o = JsonObject.parse(c.row(i));
  if (o === null) { c.fail("row " + i.toString() + ": not a JSON object"); return false; }
  let bad = "";
  for (let k = 0; k < o.size; k++) {
    const raw = o.rawAt(k);
    if (raw == "null") continue;
    const name = lower(o.nameAt(k));
    const isStr = raw.charCodeAt(0) == 0x22;
    if (name == "event") {
      if (isStr) e.event = decodeString(raw); else bad = "event";
    } else if (name == "item") {
      if (isStr) e.item = decodeString(raw); else bad = "item";
    } else if (name == "qty") {
      if (parseInt64(raw)) e.qty = parsedInt; else bad = "qty";
    } else if (name == "price") {
      const c0 = raw.charCodeAt(0); // a number starts with - or a digit
      const f = c0 == 0x2d || (c0 >= 0x30 && c0 <= 0x39) ? parseFloat(raw) : NaN;
      if (isFinite(f)) e.price = f; else bad = "price";
    }
  }
  if (bad.length > 0) { c.fail("row " + i.toString() + ": json: cannot unmarshal into field event." + bad); return false; }
  return true;
}

// The cart's line for an item, as stored in items: {"qty": n, "price": p}.
class Line {
  constructor(public qty: i64, public price: f64) {}
}

function readLine(v: string): Line {
  const o = JsonObject.parse(v);
  if (o === null) return new Line(0, 0);
  return new Line(o.getI64("qty"), o.getF64("price"));
}

function lineJSON(l: Line): string { return new JsonWriter().i64("qty", l.qty).f64("price", l.price).toString(); }

class Carts extends StatefulProcessor {
  items!: MapState;      // item -> {"qty", "price"}
  history!: ListState;   // the event names, TTL config.history_ttl
  abandonAt!: ValueState; // the timers' timestamps
  remindAt!: ValueState;
  abandonAfterMs: i64 = 0;
  remindAfterMs: i64 = 0;

  init(h: ProcessorHandle): void {
    const c = h.config;
    const abandon = positiveDuration(c, "abandon_after");
    const remind = positiveDuration(c, "remind_after");
    const ttl = positiveDuration(c, "history_ttl");
    if (c.error === null && ttl < 1000000) c.fail("groupstate: state variable \"history\": ttl is not at least 1ms");
    this.abandonAfterMs = abandon / 1000000; // Duration.Milliseconds: truncated
    this.remindAfterMs = remind / 1000000;
    this.items = h.mapState("items");
    this.history = h.listState("history", ttl / 1000000);
    this.abandonAt = h.valueState("abandon_at");
    this.remindAt = h.valueState("remind_at");
  }

  // The rows in arrival order, then the abandon timer moved and the reminder set of a cart
  // that has items.
  handleInputRows(c: Call): void {
    for (let i = 0; i < c.rowCount; i++) {
      const e = new Event();
      if (!readEvent(c, i, e)) return;
      this.history.append(quote(e.event));
      if (e.event == "add") {
        const v = this.items.get(e.item);
        const l = v === null ? new Line(0, 0) : readLine(v);
        l.qty += e.qty;
        l.price = e.price;
        this.items.update(e.item, lineJSON(l));
      } else if (e.event == "remove") {
        const v = this.items.get(e.item);
        if (v === null) continue;
        const l = readLine(v);
        l.qty -= e.qty;
        if (l.qty <= 0) this.items.remove(e.item);
        else this.items.update(e.item, lineJSON(l));
      } else if (e.event == "checkout") {
        this.summary(c, "checkout", true);
        this.clear(c);
      } else {
        c.fail("carts: unknown event " + quote(e.event));
        return;
      }
    }
    if (!this.items.exists()) return; // an empty cart keeps the timers it has
    const now = c.currentProcessingTimeMs();
    const old = this.abandonAt.get();
    if (old !== null) c.deleteTimer(I64.parseInt(old));
    let at = now + this.abandonAfterMs;
    c.registerTimer(at);
    this.abandonAt.update(at.toString());
    if (this.remindAt.exists()) return; // one reminder per cart: later activity does not move it
    at = now + this.remindAfterMs;
    c.registerTimer(at);
    this.remindAt.update(at.toString());
  }

  // The abandon timer abandons the cart; the reminder reminds the user (remind_at stays set).
  handleExpiredTimer(c: Call, timerMs: i64): void {
    const a = this.abandonAt.get();
    if (a !== null && I64.parseInt(a) == timerMs) {
      this.summary(c, "abandoned", true);
      this.clear(c);
      return;
    }
    const r = this.remindAt.get();
    if (r !== null && I64.parseInt(r) == timerMs) this.summary(c, "reminder", false);
  }

  // Emits the cart's row: {"user_id", "event": what, "items", "total"[, "events"]}.
  summary(c: Call, what: string, events: bool): void {
    let n: i64 = 0;
    let total: f64 = 0;
    const it = this.items.iterator();
    while (it.next()) {
      const l = readLine(it.value);
      n++;
      total += <f64>l.qty * l.price;
    }
    if (!isFinite(total)) { c.fail("json: unsupported value: a total that is not finite"); return; }
    const w = new JsonWriter().raw("user_id", c.key.json).str("event", what).i64("items", n).f64("total", total);
    if (events) {
      let live: i64 = 0;
      const h = this.history.iterator();
      while (h.next()) live++;
      w.i64("events", live);
    }
    c.emit(w);
  }

  // Empties every variable and deletes every timer.
  clear(c: Call): void {
    this.items.clear();
    this.history.clear();
    this.abandonAt.clear();
    this.remindAt.clear();
    const ts = c.listTimers();
    for (let i = 0; i < ts.length; i++) c.deleteTimer(ts[i]);
  }
}

registerProcessor(new Carts());
