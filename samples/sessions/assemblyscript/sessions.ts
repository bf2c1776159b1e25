// sessions: event-time sessionization. A user's events belong to one session until a gap of
// more than config.gap (default 5s) of event time; a session is emitted when a later event
// opens the next one, or when the watermark passes its end plus the gap.
//
// Build (from the repository root; `make samples-assemblyscript` runs the same):
//
//   sdk/assemblyscript/node_modules/.bin/asc samples/sessions/assemblyscript/sessions.ts -o samples/sessions/assemblyscript/sessions.wasm --runtime minimal --exportStart _initialize --use abort=__gs_abort -O3

import {
  register, onInit, Config, Group, JsonObject, JsonWriter, JsonKind, parseRFC3339,
} from "../../../sdk/assemblyscript/assembly/index";
export * from "../../../sdk/assemblyscript/assembly/exports";

// config.gap in milliseconds.
let gapMs: i64 = 5000;

onInit((c: Config): void => {
  if (!c.has("gap")) return;
  const ns = c.durationNs("gap");
  if (c.error !== null) return;
  if (ns / 1000000 <= 0) {
    c.fail("sessions: config.gap must be at least 1ms");
    return;
  }
  gapMs = ns / 1000000;
});

// The state of a user, and an emitted session: {"start", "end", "events"}.
class Session {
  constructor(public start: i64, public end: i64, public events: i64) {}

  static from(o: JsonObject): Session {
    return new Session(o.getI64("start"), o.getI64("end"), o.getI64("events"));
  }

  toJSON(): string {
    return new JsonWriter().i64("start", this.start).i64("end", this.end).i64("events", this.events).toString();
  }

  emit(g: Group): void {
    g.emit(new JsonWriter().raw("user_id", g.key.json)
      .i64("start", this.start).i64("end", this.end).i64("events", this.events));
  }
}

// A row's event time `ts`: epoch milliseconds (a number, truncated) or an RFC 3339 string.
// A row without ts has 0. Returns false (and fails the group) when it is anything else.
let ts: i64 = 0;
function eventTime(g: Group, row: JsonObject): bool {
  const k = row.kind("ts");
  if (k == JsonKind.MISSING) { ts = 0; return true; }
  if (k == JsonKind.NUMBER) {
    // As Go's float64 -> int64: exact below 2^53, where an integer literal needs no float.
    ts = row.getI64("ts", i64.MAX_VALUE);
    if (ts >= 1 << 53 || ts <= -(1 << 53)) ts = <i64>row.getF64("ts");
    return true;
  }
  const s = row.getString("ts");
  const t = s !== null ? parseRFC3339(s) : null;
  if (t === null) {
    g.fail("ts: want epoch milliseconds or an RFC 3339 string, got " + row.getRaw("ts")!);
    return false;
  }
  ts = t.ms;
  return true;
}

register((g: Group): void => {
  const st = g.state;
  const prev = st.getObject();
  let s: Session | null = prev !== null ? Session.from(prev) : null;
  if (st.hasTimedOut()) {
    if (s !== null) s.emit(g);
    st.remove();
    return;
  }
  const times = new Array<i64>(g.rowCount);
  for (let i = 0; i < g.rowCount; i++) {
    if (!eventTime(g, g.rowObject(i))) return;
    times[i] = ts;
  }
  times.sort();
  for (let i = 0; i < times.length; i++) {
    const t = times[i];
    if (s === null) {
      s = new Session(t, t, 1);
    } else if (t > s.end + gapMs) {
      s.emit(g);
      s = new Session(t, t, 1);
    } else {
      if (t < s.start) s.start = t;
      if (t > s.end) s.end = t;
      s.events++;
    }
  }
  if (s === null) return; // no rows (cannot happen on a data call) and no session
  if (st.update(s.toJSON()) !== null) return;
  // Every row that reaches the handler is later than the watermark, so end + gap is too; the
  // clamp only guards a deployment without late-row filtering. Without a watermark the
  // error is caught here and setTimeoutTimestamp reports the real problem.
  let timeout = s.end + gapMs;
  const w = st.currentWatermarkMs();
  if (g.clearError() === null && timeout < w) timeout = w;
  st.setTimeoutTimestamp(timeout);
});
