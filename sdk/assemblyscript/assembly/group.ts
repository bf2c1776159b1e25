// What the user's function sees for one group: the key, the rows, the state handle, emit.
// The SDK reuses one Group (with its Key and GroupState) for every group: none of them, nor
// anything read in place from the input (rowObject, state.getObject), is valid after the
// handler returns.

import { outString, outUTF16, outBytes } from "./buffer";
import { JsonObject, JsonWriter, decodeString } from "./json";

/** The deployment's timeout mode (spec `timeout`). */
export enum TimeoutMode {
  NONE = 0,
  PROCESSING_TIME = 1,
  EVENT_TIME = 2,
}

/** The state action of a group result. */
export const enum Action {
  KEEP = 0,
  UPDATE = 1,
  REMOVE = 2,
}

/** The grouping key: one JSON string or number in canonical form (abi/README.md 5.1). */
export class Key {
  private ptr: usize = 0;
  private len: usize = 0;
  private jsonText: string | null = null;
  private decoded: string | null = null;

  /** @internal */
  reset(ptr: usize, len: usize): void {
    this.ptr = ptr;
    this.len = len;
    this.jsonText = null;
    this.decoded = null;
  }

  /** The key's JSON text, for example `"alice"` (with the quotes) or `42`: emit it with
   *  JsonWriter.raw to keep its JSON type. */
  get json(): string {
    const j = this.jsonText;
    if (j !== null) return j;
    const v = String.UTF8.decodeUnsafe(this.ptr, this.len);
    this.jsonText = v;
    return v;
  }

  /** Whether the key is a JSON string (otherwise it is a number). */
  get isString(): bool { return this.len > 0 && load<u8>(this.ptr) == 0x22; }

  /** The key decoded: a string's contents without quotes or escapes, or a number's text. */
  get value(): string {
    const d = this.decoded;
    if (d !== null) return d;
    const v = this.isString ? decodeString(this.json) : this.json;
    this.decoded = v;
    return v;
  }
}

/** Spark's GroupState for one key and call. A failed operation changes nothing, returns its
 *  message (or a neutral value) and records the message as the group's error, which fails
 *  the group unless the handler catches it with Group.clearError. */
export class GroupState {
  /** @internal */ action: Action = Action.KEEP;
  /** @internal */ timeoutSet: bool = false;
  /** @internal */ timeoutMs: i64 = 0;
  /** @internal */ value: string | null = null;
  /** @internal */ g!: Group;
  private has: bool = false;
  private raw: bool = false; // the value is the input's, not decoded yet
  private statePtr: usize = 0;
  private stateLen: usize = 0;
  private timedOut: bool = false;
  private T: i64 = 0;
  private W: i64 = 0;
  private mode: TimeoutMode = TimeoutMode.NONE;
  private hasWatermark: bool = false;

  /** @internal */
  reset(exists: bool, statePtr: usize, stateLen: usize, timedOut: bool, T: i64, W: i64, mode: TimeoutMode, hasWatermark: bool): void {
    this.action = Action.KEEP;
    this.timeoutSet = false;
    this.timeoutMs = 0;
    this.value = null;
    this.has = exists;
    this.raw = exists;
    this.statePtr = statePtr;
    this.stateLen = stateLen;
    this.timedOut = timedOut;
    this.T = T;
    this.W = W;
    this.mode = mode;
    this.hasWatermark = hasWatermark;
  }

  /** Whether the key has a value: the one it came with or one set by update, and not removed
   *  since. */
  exists(): bool { return this.has; }

  /** The value; an error when there is none (then it returns ""). */
  get(): string {
    const v = this.getOption();
    if (v === null) {
      this.g.fail("groupstate: state is either not defined or has already been removed");
      return "";
    }
    return v;
  }

  /** The value, or null when there is none. */
  getOption(): string | null {
    if (!this.has) return null;
    if (this.raw) {
      this.value = String.UTF8.decodeUnsafe(this.statePtr, this.stateLen);
      this.raw = false;
    }
    return this.value;
  }

  /** The value parsed as a JSON object; null when there is none or it is not an object.
   *  Not an error either way. The value the call came with is parsed in place. */
  getObject(): JsonObject | null {
    if (!this.has) return null;
    if (this.raw) return JsonObject.parseBytes(null, this.statePtr, this.stateLen);
    return JsonObject.parse(this.value!);
  }

  /** Sets the value (stored as UTF-8; "" is a valid value). null is an error. Returns null or
   *  the error message. */
  update(v: string | null): string | null {
    if (v === null) return this.g.fail("groupstate: null is not a valid state value");
    this.value = v;
    this.raw = false;
    this.has = true;
    this.action = Action.UPDATE;
    return null;
  }

  /** Removes the value (repeatable; a later update revives it). Keeps a timeout set in the
   *  same call. */
  remove(): void {
    this.has = false;
    this.raw = false;
    this.value = null;
    this.action = Action.REMOVE;
  }

  /** Whether this is a timeout call (no rows). */
  hasTimedOut(): bool { return this.timedOut; }

  /** Sets the timeout to T + durationMs. Only with `timeout: processing_time`, and
   *  durationMs > 0. Returns null or the error message. */
  setTimeoutDuration(durationMs: i64): string | null {
    if (this.mode != TimeoutMode.PROCESSING_TIME) {
      return this.g.fail("groupstate: cannot set timeout duration without processing_time timeout");
    }
    if (durationMs <= 0) return this.g.fail("groupstate: timeout duration must be positive");
    if (durationMs > i64.MAX_VALUE - this.T) {
      return this.g.fail("groupstate: timeout duration " + durationMs.toString() + " ms overflows the processing time " + this.T.toString() + " ms");
    }
    this.timeoutSet = true;
    this.timeoutMs = this.T + durationMs;
    return null;
  }

  /** Sets the timeout to the event time tsMs. Only with `timeout: event_time`, tsMs > 0 and
   *  tsMs >= the watermark. Returns null or the error message. */
  setTimeoutTimestamp(tsMs: i64): string | null {
    if (this.mode != TimeoutMode.EVENT_TIME) {
      return this.g.fail("groupstate: cannot set timeout timestamp without event_time timeout");
    }
    if (tsMs <= 0) return this.g.fail("groupstate: timeout timestamp must be positive");
    if (tsMs < this.W) {
      return this.g.fail("groupstate: timeout timestamp (" + tsMs.toString() + ") cannot be earlier than the current watermark (" + this.W.toString() + ")");
    }
    this.timeoutSet = true;
    this.timeoutMs = tsMs;
    return null;
  }

  /** The watermark W (0 in the first batch); an error (then 0) when the deployment has no
   *  event_time. */
  currentWatermarkMs(): i64 {
    if (!this.hasWatermark) {
      this.g.fail("groupstate: no watermark is defined");
      return 0;
    }
    return this.W;
  }

  /** The batch's processing time T. */
  currentProcessingTimeMs(): i64 { return this.T; }
}

/** One group: a key, its rows of the batch (none on a timeout call), its state, and emit.
 *  Valid only during the call of the handler that received it. */
export class Group {
  /** The key. */
  readonly key: Key = new Key();
  /** The state handle. */
  state!: GroupState;
  /** The group's index in the current call (what groupstate.group_begin received). */
  index: i32 = 0;
  /** @internal */ emitted: u32 = 0;
  /** @internal */ err: string | null = null;

  /** @internal */
  constructor(private rowsAt: Array<usize>) { // pairs of (offset, length) into the input
    const st = new GroupState();
    st.g = this;
    this.state = st;
  }

  /** @internal */
  reset(index: i32, keyPtr: usize, keyLen: usize): void {
    this.index = index;
    this.key.reset(keyPtr, keyLen);
    this.emitted = 0;
    this.err = null;
  }

  /** The number of rows; 0 on a timeout call. */
  get rowCount(): i32 { return this.rowsAt.length >> 1; }

  /** Row `i` (0-based, arrival order) as JSON text, decoded from UTF-8 on every call. */
  row(i: i32): string {
    return String.UTF8.decodeUnsafe(this.rowsAt[i << 1], this.rowsAt[(i << 1) + 1]);
  }

  /** Row `i` parsed as an object (rows are always JSON objects), read in place from the
   *  input: like the row itself, valid only during this call. */
  rowObject(i: i32): JsonObject {
    return JsonObject.parseBytes(null, this.rowsAt[i << 1], this.rowsAt[(i << 1) + 1])!;
  }

  /** Emits one output row: a string holding a JSON document, or a JsonWriter. It is copied
   *  at once into the result as UTF-8 (the writer may be reset and reused right after). */
  emit<T>(row: T): void {
    if (row instanceof JsonWriter) {
      outUTF16(row.seal(), row.units + 1);
    } else if (isString<T>()) {
      outString(changetype<string>(row));
    } else {
      ERROR("Group.emit takes a string or a JsonWriter");
    }
    this.emitted++;
  }

  /** Emits input row `i` unchanged (its bytes, without decoding). */
  emitRow(i: i32): void {
    outBytes(this.rowsAt[i << 1], this.rowsAt[(i << 1) + 1]);
    this.emitted++;
  }

  /** Fails the group with `message` (like an exception leaving the handler): when the handler
   *  returns, its emits, state change and timeout are discarded and the host applies the
   *  deployment's on_error policy. Keeps the first error. Returns `message`. */
  fail(message: string): string {
    if (this.err === null) this.err = message.length > 0 ? message : "handler failed";
    return message;
  }

  /** The error that fails the group when the handler returns, or null. */
  get error(): string | null { return this.err; }

  /** Catches the pending error: returns it (or null) and clears it, so the group does not
   *  fail because of it. */
  clearError(): string | null {
    const e = this.err;
    this.err = null;
    return e;
  }
}
