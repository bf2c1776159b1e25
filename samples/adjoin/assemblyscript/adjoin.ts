// adjoin, the stream-stream join sample (ABI v2, a deployment with two inputs): joins ad
// impressions with the clicks on them, a click at c matching an impression at i of the same ad
// when i <= c <= i + within, emits each pair once, and emits an impression that no click
// matched with click_ts null once the watermark has passed i + within (a left outer join).
// Behaves exactly like samples/adjoin/go (../README.md has the rules and the scenario).
//
// Build (from the repository root; `make samples-assemblyscript` runs the same):
//
//   sdk/assemblyscript/node_modules/.bin/asc samples/adjoin/assemblyscript/adjoin.ts -o samples/adjoin/assemblyscript/adjoin.wasm --runtime minimal --exportStart _initialize --use abort=__gs_abort -O3

import { JsonObject, JsonWriter } from "../../../sdk/assemblyscript/assembly/index";
import {
  StatefulProcessor, ProcessorHandle, Call, ListState, registerProcessor,
} from "../../../sdk/assemblyscript/assembly/processor";
export * from "../../../sdk/assemblyscript/assembly/exports-v2";

// The spec's inputs.
const IMPRESSIONS = "impressions";
const CLICKS = "clicks";

// An element of the impressions list, stored as {"ts", "matched"}: an impression's time, and
// whether a click matched it.
class Impression {
  constructor(public ts: i64, public matched: bool) {}
}

// A JSON number's value as Go's int64(float64) gives it: truncated (saturated out of range).
function toI64(f: f64): i64 {
  if (f >= 9223372036854775808.0) return i64.MAX_VALUE;
  if (f < -9223372036854775808.0) return i64.MIN_VALUE;
  return <i64>f;
}

// A row's ts as the Go sample reads it: field ts (its name matched ASCII case-insensitively,
// the last one winning, as encoding/json does), a JSON number in epoch milliseconds, truncated.
// Otherwise rowTsError says what is wrong ("no ts", "ts \"x\" is not a number").
let rowTsError: string | null = null;
function rowTs(o: JsonObject): i64 {
  let raw: string | null = null;
  for (let i = 0; i < o.size; i++) {
    const name = o.nameAt(i);
    if (name.length == 2 && (name.charCodeAt(0) | 32) == 0x74 && (name.charCodeAt(1) | 32) == 0x73) raw = o.rawAt(i);
  }
  rowTsError = null;
  if (raw === null) { rowTsError = "no ts"; return 0; }
  const r = raw;
  const c0 = r.charCodeAt(0);
  if (c0 == 0x2d || (c0 >= 0x30 && c0 <= 0x39)) {
    const f = parseFloat(r);
    if (isFinite(f)) return toI64(f);
  }
  rowTsError = "ts " + r + " is not a number";
  return 0;
}

// names as Go's %q prints a []string: ["a" "b"] (input names need no escapes).
function quoted(names: Array<string>): string {
  let s = "[";
  for (let i = 0; i < names.length; i++) s += (i > 0 ? " \"" : "\"") + names[i] + "\"";
  return s + "]";
}

// The processor: each side's rows wait in a list until the watermark has passed the last time
// a row of the other side could match them.
class Adjoin extends StatefulProcessor {
  impressions!: ListState; // {"ts": i, "matched": bool} per buffered impression
  clicks!: ListState;      // the buffered clicks' times
  withinMs: i64 = 0;
  imps: Array<Impression> = [];
  clickTs: Array<i64> = [];

  init(h: ProcessorHandle): void {
    const c = h.config;
    const within = c.durationMs("within", 0); // truncated, as Go's Duration.Milliseconds
    if (c.error !== null) return;
    if (within <= 0) { c.fail("adjoin: config within must be a positive duration"); return; }
    this.withinMs = within;
    const inputs = h.inputs;
    if (inputs.length != 2 || !inputs.includes(IMPRESSIONS) || !inputs.includes(CLICKS)) {
      c.fail("adjoin: the spec's inputs must be " + IMPRESSIONS + " and " + CLICKS + ", got " + quoted(inputs));
      return;
    }
    this.impressions = h.listState("impressions");
    this.clicks = h.listState("clicks");
  }

  // Reads both lists into imps and clickTs; false (the call failed) when one does not decode.
  load(c: Call): bool {
    this.imps = [];
    this.clickTs = [];
    const imps = this.impressions.toArray();
    for (let i = 0; i < imps.length; i++) {
      const o = JsonObject.parse(imps[i]);
      if (o === null) { c.fail("groupstate: decoding state variable impressions: not a JSON object: " + imps[i]); return false; }
      this.imps.push(new Impression(o.getI64("ts"), o.getBool("matched")));
    }
    const clicks = this.clicks.toArray();
    for (let i = 0; i < clicks.length; i++) this.clickTs.push(I64.parseInt(clicks[i]));
    return c.error === null;
  }

  // Writes list l of n elements back when the call changed it: the elements from its first
  // `kept` on are appended when the ones before are unchanged (changed false: the common case
  // of a data call, one op per row), else the list is written whole; an empty list is cleared,
  // so a key whose rows have all been evicted holds no state. els are the elements to write:
  // all n when changed, else the ones from `kept` on.
  store(l: ListState, n: i32, els: Array<string>, kept: i32, changed: bool): void {
    if (n == 0) {
      if (kept > 0 || changed) l.clear();
    } else if (changed) l.put(els);
    else if (n > kept) l.appendAll(els);
  }

  // Writes the impressions back (see store).
  storeImpressions(kept: i32, changed: bool): void {
    const els = new Array<string>();
    for (let i = changed ? 0 : kept; i < this.imps.length; i++) {
      els.push(new JsonWriter().i64("ts", this.imps[i].ts).bool("matched", this.imps[i].matched).toString());
    }
    this.store(this.impressions, this.imps.length, els, kept, changed);
  }

  // Writes the clicks back (see store).
  storeClicks(kept: i32, changed: bool): void {
    const els = new Array<string>();
    for (let i = changed ? 0 : kept; i < this.clickTs.length; i++) els.push(this.clickTs[i].toString());
    this.store(this.clicks, this.clickTs.length, els, kept, changed);
  }

  // Emits {"ad_id", "impression_ts", "click_ts"}; click_ts null (hasClick false) for an
  // unmatched impression.
  emit(c: Call, impressionTs: i64, clickTs: i64, hasClick: bool): void {
    const w = new JsonWriter().raw("ad_id", c.key.json).i64("impression_ts", impressionTs);
    if (hasClick) w.i64("click_ts", clickTs);
    else w.null("click_ts");
    c.emit(w);
  }

  // Joins each row, in order, with the other side's buffered rows, then buffers it until the
  // watermark passes the last time it could match: an impression at i until i + within, a
  // click at c until c.
  handleInputRows(c: Call): void {
    if (!this.load(c)) return;
    const buffered = this.imps.length, bufferedClicks = this.clickTs.length; // the elements in the lists already
    let marked = false; // one of them was matched by a click of this call
    for (let n = 0; n < c.rowCount; n++) {
      const input = c.rowInput(n);
      const o = JsonObject.parse(c.row(n));
      if (o === null) { c.fail("adjoin: row " + n.toString() + " (" + input + "): not a JSON object"); return; }
      const ts = rowTs(o);
      if (rowTsError !== null) { c.fail("adjoin: row " + n.toString() + " (" + input + "): " + rowTsError!); return; }
      if (input == IMPRESSIONS) {
        let matched = false;
        for (let k = 0; k < this.clickTs.length; k++) {
          const click = this.clickTs[k];
          if (ts <= click && click <= ts + this.withinMs) {
            this.emit(c, ts, click, true);
            matched = true;
          }
        }
        this.imps.push(new Impression(ts, matched));
        c.registerTimer(ts + this.withinMs);
      } else if (input == CLICKS) {
        for (let k = 0; k < this.imps.length; k++) {
          const im = this.imps[k];
          if (im.ts <= ts && ts <= im.ts + this.withinMs) {
            this.emit(c, im.ts, ts, true);
            marked = marked || (k < buffered && !im.matched);
            im.matched = true;
          }
        }
        this.clickTs.push(ts);
        c.registerTimer(ts);
      } else {
        c.fail("adjoin: row " + n.toString() + " comes from unknown input \"" + input + "\"");
        return;
      }
    }
    this.storeImpressions(buffered, marked);
    this.storeClicks(bufferedClicks, false);
  }

  // Evicts what no row can match any more, now that the watermark has passed timerMs: the
  // impressions with i + within <= timerMs (one that no click matched is emitted with
  // click_ts null) and the clicks with c <= timerMs (dropped).
  handleExpiredTimer(c: Call, timerMs: i64): void {
    if (!this.load(c)) return;
    const nImps = this.imps.length, nClicks = this.clickTs.length;
    const keep = new Array<Impression>();
    for (let k = 0; k < this.imps.length; k++) {
      const im = this.imps[k];
      if (im.ts + this.withinMs > timerMs) keep.push(im);
      else if (!im.matched) this.emit(c, im.ts, 0, false);
    }
    this.imps = keep;
    const clicks = new Array<i64>();
    for (let k = 0; k < this.clickTs.length; k++) if (this.clickTs[k] > timerMs) clicks.push(this.clickTs[k]);
    this.clickTs = clicks;
    this.storeImpressions(nImps, keep.length != nImps);
    this.storeClicks(nClicks, clicks.length != nClicks);
  }
}

registerProcessor(new Adjoin());
