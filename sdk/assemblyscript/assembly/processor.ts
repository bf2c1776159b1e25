// ABI v2 (abi/README.md section 9): transformWithState processors. A key holds named state
// variables (ValueState, ListState, MapState, each with an optional TTL) and any number of
// timers; the processor is called for a key's rows, for each expired timer, and once with the
// key's initial state.
//
//   import { StatefulProcessor, ProcessorHandle, Call, ValueState, registerProcessor } from "groupstate-as/assembly/processor";
//   export * from "groupstate-as/assembly/exports-v2";   // instead of assembly/exports
//
// Only a module that imports this file (and exports-v2) imports groupstate.state: nothing in
// the v1 files refers to it, so v1 modules stay exactly as they were.

import { outString, outUTF16, outBytes } from "./buffer";
import { Config } from "./config";
import { Key, TimeoutMode } from "./group";
import { JsonObject, JsonWriter, jsonArrayElements, jsonCompact } from "./json";

@external("groupstate", "state")
declare function host_state(reqPtr: usize, reqLen: usize, respPtr: usize, respCap: usize): i32;

// ---- declarations -------------------------------------------------------------------------

/** @internal */ export const KIND_VALUE: u32 = 1;
/** @internal */ export const KIND_LIST: u32 = 2;
/** @internal */ export const KIND_MAP: u32 = 3;

/** @internal A declared variable. */
export class Decl {
  constructor(readonly name: string, readonly kind: u32, readonly ttlMs: i64) {}
}

/** @internal */ export const decls = new Array<Decl>();
/** @internal */ export let declaring = false;
/** @internal */ export let declErr: string | null = null;
/** @internal */ export function setDeclaring(on: bool): void { declaring = on; if (on) { decls.length = 0; declErr = null; } }

function validName(name: string): string | null {
  const n = String.UTF8.byteLength(name);
  if (n < 1 || n > 64) return "a name is 1-64 bytes";
  const c0 = name.charCodeAt(0);
  if (c0 < 0x61 || c0 > 0x7a) return "a name starts with a letter a-z";
  for (let i = 0; i < name.length; i++) {
    const c = name.charCodeAt(i);
    if (!((c >= 0x61 && c <= 0x7a) || (c >= 0x30 && c <= 0x39) || c == 0x5f)) return "a name has only a-z, 0-9 and _";
  }
  return null;
}

function declare(fn: string, name: string, kind: u32, ttlMs: i64): u32 {
  if (!declaring) throw new Error("groupstate: " + fn + "(\"" + name + "\") called outside the processor's init");
  let why = validName(name);
  if (why === null && ttlMs < 0) why = "ttlMs is negative";
  for (let i = 0; why === null && i < decls.length; i++) if (decls[i].name == name) why = "declared twice";
  if (why === null && decls.length >= 256) why = "more than 256 state variables";
  if (why !== null) {
    if (declErr === null) declErr = "groupstate: " + fn + "(\"" + name + "\"): " + why;
    return 0xffffffff;
  }
  decls.push(new Decl(name, kind, ttlMs));
  return <u32>(decls.length - 1);
}

/** @internal The deployment's input names (the init's HAS_INPUTS), empty without. */
export const inputNames = new Array<string>();

/** What the processor's init receives: the deployment's config, its inputs and the
 *  declarations. */
export class ProcessorHandle {
  /** @internal */ constructor(
    readonly config: Config,
    /** The names of the deployment's inputs, in the spec's order: empty for a deployment with
     *  one input (no `inputs:` in the spec). A processor that needs given inputs checks them
     *  here and fails the init (config.fail) naming the problem. */
    readonly inputs: Array<string>,
  ) {}

  /** Declares a value variable. name: 1-64 characters of [a-z0-9_] starting with a letter,
   *  unique; ttlMs: 0 (none) or how long a value lives after it was last written
   *  (processing time). An invalid declaration fails the init with a message naming it. */
  valueState(name: string, ttlMs: i64 = 0): ValueState { return new ValueState(name, declare("valueState", name, KIND_VALUE, ttlMs)); }
  /** Declares a list variable (the TTL applies to each element). */
  listState(name: string, ttlMs: i64 = 0): ListState { return new ListState(name, declare("listState", name, KIND_LIST, ttlMs)); }
  /** Declares a map variable (the TTL applies to each entry). */
  mapState(name: string, ttlMs: i64 = 0): MapState { return new MapState(name, declare("mapState", name, KIND_MAP, ttlMs)); }
}

// ---- the processor ------------------------------------------------------------------------

/** A transformWithState processor (Spark 4's StatefulProcessor). Extend it, override the
 *  methods, and register one instance with registerProcessor from top-level code. A failed
 *  operation never throws: it records the call's error (Call.fail), which fails the call. */
export class StatefulProcessor {
  /** Once per instance: declare the variables (keep the handles in fields). */
  init(h: ProcessorHandle): void {}
  /** Once per key and batch with the key's rows (at least one). */
  handleInputRows(call: Call): void { call.fail("groupstate: the processor does not override handleInputRows"); }
  /** Once per expired timer of a key, in timestamp order, after every data call of the batch.
   *  A timer that an earlier call of the key's timer group deleted does not fire. */
  handleExpiredTimer(call: Call, timerMs: i64): void { call.fail("groupstate: the processor does not override handleExpiredTimer"); }
  /** Once per key of the deployment's initial state (first batch, before the data calls), with
   *  the key's line, an object of variable names. The default sets each named variable: a
   *  value to the JSON value, a list to the array's elements, a map to the object's entries
   *  (null is as absent); a name that is not declared fails the call. */
  handleInitialState(call: Call, initial: JsonObject): void { applyInitialState(call, initial); }
}

let processorObj: StatefulProcessor | null = null;

/** Registers the module's processor (ABI v2). Call it from top-level code, and re-export
 *  "groupstate-as/assembly/exports-v2" from the entry file. */
export function registerProcessor(p: StatefulProcessor): void { processorObj = p; }
/** @internal */ export function processor(): StatefulProcessor | null { return processorObj; }

// ---- one call -----------------------------------------------------------------------------

/** @internal */ export const GROUP_DATA: u32 = 0;
/** @internal */ export const GROUP_TIMERS: u32 = 1;
/** @internal */ export const GROUP_INITIAL: u32 = 2;

/** One call of the processor: the key, the rows (data calls), emit, failure, timers and the
 *  batch's times. The SDK reuses one Call; it is valid only during the call. */
export class Call {
  /** The key. */
  readonly key: Key = new Key();
  /** The group's index in the current guest call. */
  index: i32 = 0;
  /** @internal */ emitted: u32 = 0;
  /** @internal */ err: string | null = null;
  /** @internal */ fatal: string | null = null;
  /** @internal */ kind: u32 = 0;
  /** @internal */ T: i64 = 0;
  /** @internal */ W: i64 = 0;
  /** @internal */ mode: TimeoutMode = TimeoutMode.NONE;
  /** @internal */ hasWatermark: bool = false;
  /** @internal */ timersPtr: usize = 0;
  /** @internal */ timerCount: i32 = 0;
  /** @internal */ timerIdx: i32 = -1;
  /** @internal */ skip: StaticArray<bool> = new StaticArray<bool>(0);

  /** @internal */ constructor(private rowsAt: Array<usize>, private rowInputs: Array<u32>) {}

  /** The number of rows (0 in timer and initial-state calls). */
  get rowCount(): i32 { return this.kind == GROUP_DATA ? this.rowsAt.length >> 1 : 0; }
  /** The input row `i` came from: one of ProcessorHandle.inputs, or "" for a deployment with
   *  one input (no `inputs:` in the spec). */
  rowInput(i: i32): string {
    if (this.kind != GROUP_DATA || <u32>i >= <u32>this.rowInputs.length) return "";
    return inputNames[this.rowInputs[i]];
  }
  /** Row `i` as JSON text. */
  row(i: i32): string { return String.UTF8.decodeUnsafe(this.rowsAt[i << 1], this.rowsAt[(i << 1) + 1]); }
  /** Row `i` parsed in place (valid during the call). */
  rowObject(i: i32): JsonObject { return JsonObject.parseBytes(null, this.rowsAt[i << 1], this.rowsAt[(i << 1) + 1])!; }

  /** Emits one output row (a JSON string or a JsonWriter), copied at once. */
  emit<T>(row: T): void {
    if (row instanceof JsonWriter) outUTF16(row.seal(), row.units + 1);
    else if (isString<T>()) outString(changetype<string>(row));
    else ERROR("Call.emit takes a string or a JsonWriter");
    this.emitted++;
  }
  /** Emits input row `i` unchanged. */
  emitRow(i: i32): void {
    outBytes(this.rowsAt[i << 1], this.rowsAt[(i << 1) + 1]);
    this.emitted++;
  }

  /** Fails the call with `message` (the first error is kept): its emits and every write and
   *  timer change of the call are discarded. Returns `message`. */
  fail(message: string): string {
    if (this.err === null) this.err = message.length > 0 ? message : "handler failed";
    return message;
  }
  /** The error that fails the call, or null. */
  get error(): string | null { return this.fatal !== null ? this.fatal : this.err; }
  /** Clears the pending error, except a failed state request's, which always fails the call. */
  clearError(): string | null {
    const e = this.err;
    this.err = null;
    return e;
  }
  /** @internal A failed state request: later state operations do nothing, the call fails. */
  fatalError(message: string): void {
    if (this.fatal === null) this.fatal = message;
    opsLen = 0;
  }

  /** Registers a timer at tsMs (registering one twice is one timer); it fires in the first
   *  batch whose processing time (timeout processing_time) or watermark (event_time) is after
   *  it. An error under timeout none. Returns null or the error message. */
  registerTimer(tsMs: i64): string | null {
    const e = this.timerCheck();
    if (e !== null) return e;
    opU8(OP_TIMER_REGISTER);
    opI64(tsMs);
    return null;
  }
  /** Deletes the timer at tsMs, if any. In a timer call, a later expired timer of the key that
   *  is deleted does not fire in this batch. Returns null or the error message. */
  deleteTimer(tsMs: i64): string | null {
    const e = this.timerCheck();
    if (e !== null) return e;
    opU8(OP_TIMER_DELETE);
    opI64(tsMs);
    if (this.kind == GROUP_TIMERS) {
      for (let j = this.timerIdx + 1; j < this.timerCount; j++) {
        if (load<i64>(this.timersPtr + (<usize>j << 3)) == tsMs) this.skip[j] = true;
      }
    }
    return null;
  }
  /** The key's timers, ascending (none under timeout none). */
  listTimers(): Array<i64> {
    const out = new Array<i64>();
    if (this.mode == TimeoutMode.NONE || this.fatal !== null) return out;
    const mark = opsLen;
    opU8(OP_TIMER_LIST);
    const n = request(mark);
    if (n < 0) return out;
    const r = answer(n);
    const count = r.u32();
    for (let i: u32 = 0; i < count && !r.bad; i++) {
      const ts = r.i64();
      if (i > 0 && ts <= out[out.length - 1]) r.bad = true;
      out.push(ts);
    }
    if (!r.done()) { badAnswer("TIMER_LIST"); out.length = 0; }
    return out;
  }
  /** The batch's processing time T. */
  currentProcessingTimeMs(): i64 { return this.T; }
  /** The batch's watermark; an error (then 0) without an event-time field. */
  currentWatermarkMs(): i64 {
    if (!this.hasWatermark) { this.fail("groupstate: no watermark is defined"); return 0; }
    return this.W;
  }

  private timerCheck(): string | null {
    if (this.fatal !== null) return this.fatal;
    if (this.mode == TimeoutMode.NONE) return this.fail("groupstate: timers need timeout processing_time or event_time in the deployment spec");
    return null;
  }
}

/** @internal The call in progress, null outside one. */
export let current: Call | null = null;
/** @internal */ export function setCurrent(c: Call | null): void { current = c; }

function call(what: string): Call {
  const c = current;
  if (c === null) throw new Error("groupstate: " + what + " used outside a call of the processor");
  return c;
}

// ---- ops and requests -------------------------------------------------------------------

const OP_VALUE_GET: u8 = 0x01, OP_VALUE_SET: u8 = 0x02, OP_VALUE_CLEAR: u8 = 0x03;
const OP_LIST_READ: u8 = 0x10, OP_LIST_APPEND: u8 = 0x11, OP_LIST_PUT: u8 = 0x12, OP_LIST_CLEAR: u8 = 0x13, OP_LIST_EXISTS: u8 = 0x14;
const OP_MAP_GET: u8 = 0x20, OP_MAP_CONTAINS: u8 = 0x21, OP_MAP_SET: u8 = 0x22, OP_MAP_REMOVE: u8 = 0x23;
const OP_MAP_READ: u8 = 0x24, OP_MAP_CLEAR: u8 = 0x25, OP_MAP_EXISTS: u8 = 0x26;
const OP_TIMER_REGISTER: u8 = 0x30, OP_TIMER_DELETE: u8 = 0x31, OP_TIMER_LIST: u8 = 0x32;

// The group's writes not sent yet, then a request's reads: raw memory, never collected.
let opsPtr: usize = 0;
let opsCap: usize = 0;
/** @internal */ export let opsLen: usize = 0;
/** @internal */ export function opsReset(): void { opsLen = 0; }
/** @internal */ export function opsStart(): usize { return opsPtr; }

function opsReserve(n: usize): usize {
  const need = opsLen + n;
  if (need > opsCap) {
    let c: usize = opsCap == 0 ? 4096 : opsCap << 1;
    if (c < need) c = need;
    opsPtr = opsPtr == 0 ? heap.alloc(c) : heap.realloc(opsPtr, c);
    opsCap = c;
  }
  return opsPtr + opsLen;
}
function opU8(v: u8): void { store<u8>(opsReserve(1), v); opsLen += 1; }
function opU32(v: u32): void { store<u32>(opsReserve(4), v); opsLen += 4; }
function opI64(v: i64): void { store<i64>(opsReserve(8), v); opsLen += 8; }
function opRaw(ptr: usize, len: usize): void {
  const p = opsReserve(4 + len);
  store<u32>(p, <u32>len);
  memory.copy(p + 4, ptr, len);
  opsLen += 4 + len;
}
function opStr(s: string): void { // a byte string holding s in UTF-8
  const p = opsReserve(4 + <usize>s.length * 3);
  const w = String.UTF8.encodeUnsafe(changetype<usize>(s), s.length, p + 4, false, String.UTF8.ErrorMode.REPLACE);
  store<u32>(p, <u32>w);
  opsLen += 4 + w;
}
function opVar(op: u8, idx: u32): void { opU8(op); opU32(idx); }

let pageBytes: u32 = 65536;
/** max_bytes of the list and map pages read while iterating (default 65536). */
export function setStatePageBytes(n: u32): void { pageBytes = n > 0 ? n : 1; }

let resp = new ArrayBuffer(0);

// Sends the pending writes and the reads appended since mark; returns the answers' length
// (in resp), or -1 when the call failed. When the answers do not fit, the writes were applied
// all the same: only the reads are sent again, with a buffer of the size the host asked for.
function request(mark: usize): i32 {
  const c = current!;
  if (resp.byteLength < <i32>pageBytes + 4096) resp = new ArrayBuffer(<i32>pageBytes + 4096);
  let req = opsPtr, reqLen = opsLen;
  for (let attempt = 0; ; attempt++) {
    const n = host_state(req, reqLen, changetype<usize>(resp), <usize>resp.byteLength);
    if (n < 0) {
      c.fatalError(n == -1 ? "groupstate: the host refused a state request (see the host's log)" : "groupstate: the state function returned " + n.toString());
      return -1;
    }
    if (n <= resp.byteLength) { opsLen = 0; return n; }
    if (attempt == 3) { c.fatalError("groupstate: the state answers keep growing"); return -1; }
    resp = new ArrayBuffer(n);
    req = opsPtr + mark;
    reqLen = opsLen - mark;
  }
  return -1;
}

// A bounds-checked reader over the answers in resp.
class Answer {
  constructor(public p: usize, public end: usize) {}
  bad: bool = false;
  u8(): u8 { // 0 or 1
    if (this.bad || this.p >= this.end || load<u8>(this.p) > 1) { this.bad = true; return 0; }
    return load<u8>(this.p++);
  }
  u32(): u32 {
    if (this.bad || this.end - this.p < 4) { this.bad = true; return 0; }
    const v = load<u32>(this.p); this.p += 4; return v;
  }
  i64(): i64 {
    if (this.bad || this.end - this.p < 8) { this.bad = true; return 0; }
    const v = load<i64>(this.p); this.p += 8; return v;
  }
  len: usize = 0;
  bytes(): usize { // the offset of a byte string's bytes (this.len: their length)
    const n = <usize>this.u32();
    if (this.bad || this.end - this.p < n) { this.bad = true; this.len = 0; return 0; }
    const at = this.p; this.p += n; this.len = n; return at;
  }
  str(): string { const at = this.bytes(); return this.bad ? "" : String.UTF8.decodeUnsafe(at, this.len); }
  done(): bool { return !this.bad && this.p == this.end; }
}

function answer(n: i32): Answer { const p = changetype<usize>(resp); return new Answer(p, p + <usize>n); }

function badAnswer(op: string): void { current!.fatalError("groupstate: malformed state answer of " + op); }

// Checks a variable op: false when it must do nothing.
function use(what: string, idx: u32): bool {
  const c = call(what);
  if (idx == 0xffffffff) { c.fail("groupstate: " + what + " on a variable whose declaration failed"); return false; }
  return c.fatal === null;
}

// A read with a present flag and, when wantValue, the value: null when absent or failed.
function readFlag(mark: usize, op: string, wantValue: bool): string | null {
  const n = request(mark);
  if (n < 0) return null;
  const r = answer(n);
  const present = r.u8();
  const v = present && wantValue ? r.str() : "";
  if (!r.done()) { badAnswer(op); return null; }
  return present ? v : null;
}

// ---- the variables ----------------------------------------------------------------------

/** A value variable (Spark's ValueState): one value per key, as a string (JSON by
 *  convention). Valid in the calls of the processor that declared it. */
export class ValueState {
  /** @internal */ constructor(readonly name: string, private idx: u32) {}

  /** Whether the key has a (live) value. */
  exists(): bool { return this.get() !== null; }
  /** The value, or null. */
  get(): string | null {
    if (!use("ValueState.get", this.idx)) return null;
    const mark = opsLen;
    opVar(OP_VALUE_GET, this.idx);
    return readFlag(mark, "VALUE_GET", true);
  }
  /** The value parsed as a JSON object, or null (no value, or not an object). */
  getObject(): JsonObject | null {
    const v = this.get();
    return v === null ? null : JsonObject.parse(v);
  }
  /** Sets the value. */
  update(v: string): void {
    if (!use("ValueState.update", this.idx)) return;
    opVar(OP_VALUE_SET, this.idx);
    opStr(v);
  }
  /** Removes the value. */
  clear(): void {
    if (!use("ValueState.clear", this.idx)) return;
    opVar(OP_VALUE_CLEAR, this.idx);
  }
}

/** A list variable (Spark's ListState). Appending sends one element to the host, never the
 *  list; iterate with iterator(), which reads the list a page at a time. */
export class ListState {
  /** @internal */ constructor(readonly name: string, private idx: u32) {}

  /** Whether the list has a (live) element. */
  exists(): bool {
    if (!use("ListState.exists", this.idx)) return false;
    const mark = opsLen;
    opVar(OP_LIST_EXISTS, this.idx);
    return readFlag(mark, "LIST_EXISTS", false) !== null;
  }
  /** An iterator over the elements in order: `while (it.next()) use(it.value)`. */
  iterator(): ListIterator { return new ListIterator(this.idx); }
  /** Every element, in order. */
  toArray(): Array<string> {
    const out = new Array<string>();
    const it = this.iterator();
    while (it.next()) out.push(it.value);
    return out;
  }
  /** Appends one element. */
  append(v: string): void { const a = new Array<string>(1); a[0] = v; this.write("ListState.append", OP_LIST_APPEND, a); }
  /** Appends the elements, in order (nothing when empty). */
  appendAll(vs: Array<string>): void { if (vs.length > 0) this.write("ListState.appendAll", OP_LIST_APPEND, vs); }
  /** Replaces the list with vs (empty: clears it). */
  put(vs: Array<string>): void { this.write("ListState.put", OP_LIST_PUT, vs); }
  /** Removes every element. */
  clear(): void {
    if (!use("ListState.clear", this.idx)) return;
    opVar(OP_LIST_CLEAR, this.idx);
  }
  private write(what: string, op: u8, vs: Array<string>): void {
    if (!use(what, this.idx)) return;
    opVar(op, this.idx);
    opU32(<u32>vs.length);
    for (let i = 0; i < vs.length; i++) opStr(vs[i]);
  }
}

/** Reads a list a page at a time. */
export class ListIterator {
  /** The current element (after next() returned true). */
  value: string = "";
  private page: Array<string> = new Array<string>();
  private at: i32 = 0;
  private cursor: u64 = 0;
  private state: i32 = 0; // 0 no page yet, 1 more pages, 2 last page

  /** @internal */ constructor(private idx: u32) {}

  /** Advances to the next element; false at the end (or when the call failed). */
  next(): bool {
    while (this.at >= this.page.length) {
      if (this.state == 2 || !use("ListIterator.next", this.idx)) return false;
      const mark = opsLen;
      opVar(OP_LIST_READ, this.idx);
      opI64(<i64>this.cursor);
      opU32(pageBytes);
      const n = request(mark);
      if (n < 0) return false;
      const r = answer(n);
      const count = r.u32();
      const page = new Array<string>();
      for (let i: u32 = 0; i < count && !r.bad; i++) page.push(r.str());
      const next = <u64>r.i64();
      if (!r.done() || (count == 0 && next != 0)) { badAnswer("LIST_READ"); return false; }
      this.page = page;
      this.at = 0;
      this.cursor = next;
      this.state = next != 0 ? 1 : 2;
    }
    this.value = this.page[this.at++];
    return true;
  }
}

/** A map variable (Spark's MapState): string keys (ordered bytewise in UTF-8), string values. */
export class MapState {
  /** @internal */ constructor(readonly name: string, private idx: u32) {}

  /** Whether the map has a (live) entry. */
  exists(): bool {
    if (!use("MapState.exists", this.idx)) return false;
    const mark = opsLen;
    opVar(OP_MAP_EXISTS, this.idx);
    return readFlag(mark, "MAP_EXISTS", false) !== null;
  }
  /** The value at key, or null. */
  get(key: string): string | null {
    if (!use("MapState.get", this.idx)) return null;
    const mark = opsLen;
    opVar(OP_MAP_GET, this.idx);
    opStr(key);
    return readFlag(mark, "MAP_GET", true);
  }
  /** Whether the map has key. */
  containsKey(key: string): bool {
    if (!use("MapState.containsKey", this.idx)) return false;
    const mark = opsLen;
    opVar(OP_MAP_CONTAINS, this.idx);
    opStr(key);
    return readFlag(mark, "MAP_CONTAINS", false) !== null;
  }
  /** Sets the value at key. */
  update(key: string, value: string): void {
    if (!use("MapState.update", this.idx)) return;
    opVar(OP_MAP_SET, this.idx);
    opStr(key);
    opStr(value);
  }
  /** Removes key. */
  remove(key: string): void {
    if (!use("MapState.remove", this.idx)) return;
    opVar(OP_MAP_REMOVE, this.idx);
    opStr(key);
  }
  /** Removes every entry. */
  clear(): void {
    if (!use("MapState.clear", this.idx)) return;
    opVar(OP_MAP_CLEAR, this.idx);
  }
  /** An iterator over the entries in key order: `while (it.next()) use(it.key, it.value)`. */
  iterator(): MapIterator { return new MapIterator(this.idx); }
  /** Every key, in order. */
  keys(): Array<string> {
    const out = new Array<string>();
    const it = this.iterator();
    while (it.next()) out.push(it.key);
    return out;
  }
  /** Every value, in key order. */
  values(): Array<string> {
    const out = new Array<string>();
    const it = this.iterator();
    while (it.next()) out.push(it.value);
    return out;
  }
}

/** Reads a map a page at a time. */
export class MapIterator {
  /** The current entry (after next() returned true). */
  key: string = "";
  value: string = "";
  private keysPage: Array<string> = new Array<string>();
  private valuesPage: Array<string> = new Array<string>();
  private at: i32 = 0;
  private cursor: ArrayBuffer = new ArrayBuffer(0);
  private state: i32 = 0;

  /** @internal */ constructor(private idx: u32) {}

  /** Advances to the next entry; false at the end (or when the call failed). */
  next(): bool {
    while (this.at >= this.keysPage.length) {
      if (this.state == 2 || !use("MapIterator.next", this.idx)) return false;
      const mark = opsLen;
      opVar(OP_MAP_READ, this.idx);
      opRaw(changetype<usize>(this.cursor), <usize>this.cursor.byteLength);
      opU32(pageBytes);
      const n = request(mark);
      if (n < 0) return false;
      const r = answer(n);
      const count = r.u32();
      const ks = new Array<string>(), vs = new Array<string>();
      let prev: usize = 0, prevLen: usize = 0;
      for (let i: u32 = 0; i < count && !r.bad; i++) {
        const k = r.bytes(), kl = r.len;
        if (!r.bad && i > 0 && compareBytes(prev, prevLen, k, kl) >= 0) r.bad = true;
        prev = k; prevLen = kl;
        ks.push(String.UTF8.decodeUnsafe(k, kl));
        vs.push(r.str());
      }
      const more = r.u8();
      const next = r.bytes(), nextLen = r.len;
      if (!r.done() || (count == 0 && more) || (!more && nextLen != 0)) { badAnswer("MAP_READ"); return false; }
      const cur = new ArrayBuffer(<i32>nextLen);
      memory.copy(changetype<usize>(cur), next, nextLen);
      this.cursor = cur;
      this.keysPage = ks;
      this.valuesPage = vs;
      this.at = 0;
      this.state = more ? 1 : 2;
    }
    this.key = this.keysPage[this.at];
    this.value = this.valuesPage[this.at++];
    return true;
  }
}

function compareBytes(a: usize, an: usize, b: usize, bn: usize): i32 {
  const n = an < bn ? an : bn;
  for (let i: usize = 0; i < n; i++) {
    const x = load<u8>(a + i), y = load<u8>(b + i);
    if (x != y) return x < y ? -1 : 1;
  }
  return an == bn ? 0 : an < bn ? -1 : 1;
}

// ---- the default initial state ----------------------------------------------------------

/** The default handling of an initial-state line (see StatefulProcessor.handleInitialState). */
export function applyInitialState(call: Call, initial: JsonObject): void {
  let unknown = "";
  for (let i = 0; i < initial.size; i++) {
    const name = initial.nameAt(i);
    if (varIndex(name) < 0) unknown += (unknown.length > 0 ? " " : "") + "\"" + name + "\"";
  }
  if (unknown.length > 0) {
    let declared = "";
    for (let i = 0; i < decls.length; i++) declared += (i > 0 ? ", " : "") + decls[i].name;
    call.fail("groupstate: initial state names undeclared state variables [" + unknown + "] (declared: " + declared + ")");
    return;
  }
  for (let i = 0; i < initial.size; i++) {
    const raw = initial.rawAt(i);
    if (raw == "null") continue;
    const idx = <u32>varIndex(initial.nameAt(i));
    const d = decls[idx];
    if (d.kind == KIND_VALUE) {
      opVar(OP_VALUE_SET, idx);
      opStr(jsonCompact(raw));
    } else if (d.kind == KIND_LIST) {
      const els = jsonArrayElements(raw);
      if (els === null) { call.fail("groupstate: initial state of " + d.name + ": want a JSON array, got " + raw); return; }
      for (let j = 0; j < els.length; j++) {
        if (els[j] == "null") { call.fail("groupstate: initial state of " + d.name + ": an element is null, which is not a valid state value"); return; }
      }
      opVar(OP_LIST_PUT, idx);
      opU32(<u32>els.length);
      for (let j = 0; j < els.length; j++) opStr(jsonCompact(els[j]));
    } else {
      const m = JsonObject.parse(raw);
      if (m === null) { call.fail("groupstate: initial state of " + d.name + ": want a JSON object, got " + raw); return; }
      opVar(OP_MAP_CLEAR, idx);
      for (let j = 0; j < m.size; j++) {
        const v = m.rawAt(j);
        if (v == "null") { call.fail("groupstate: initial state of " + d.name + ": a map value is null, which is not a valid state value"); return; }
        opVar(OP_MAP_SET, idx);
        opStr(m.nameAt(j));
        opStr(jsonCompact(v));
      }
    }
  }
}

function varIndex(name: string): i32 {
  for (let i = 0; i < decls.length; i++) if (decls[i].name == name) return i;
  return -1;
}
