// What the user's function sees for one group: the key, the rows, the state handle, emit.

import { outString, outBytes } from "./buffer";
import { JsonObject, decodeString } from "./json";

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

/** The grouping key: one JSON string or number in canonical form. */
export class Key {
  private decoded: string | null = null;

  /** @param json the key's JSON text, for example `"alice"` (with the quotes) or `42`. */
  constructor(readonly json: string) {}

  /** Whether the key is a JSON string (otherwise it is a number). */
  get isString(): bool { return this.json.charCodeAt(0) == 0x22; }

  /** The key decoded: a string's contents without quotes or escapes, or a number's text. */
  get value(): string {
    let d = this.decoded;
    if (d === null) {
      d = this.isString ? decodeString(this.json, 0, this.json.length) : this.json;
      this.decoded = d;
    }
    return d;
  }
}

/** Spark's GroupState for one key and call. A failed operation changes nothing, returns its
 *  message (or a neutral value) and records the message as the group's error (see
 *  Group.fail and Group.clearError). */
export class GroupState {
  /** @internal */ action: Action = Action.KEEP;
  /** @internal */ timeoutSet: bool = false;
  /** @internal */ timeoutMs: i64 = 0;
  /** @internal */ value: string | null = null;
  private has: bool;
  private raw: bool; // value not decoded yet from the input

  /** @internal */
  constructor(
    private g: Group,
    exists: bool,
    private statePtr: usize,
    private stateLen: usize,
    private timedOut: bool,
    private T: i64,
    private W: i64,
    private mode: TimeoutMode,
    private hasWatermark: bool,
  ) {
    this.has = exists;
    this.raw = exists;
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
      return this.g.fail("groupstate: timeout duration " + durationMs.toString() + " ms overflows the processing time " + this.T.toString());
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
  readonly key: Key;
  /** The state handle. */
  state!: GroupState;
  /** @internal */ emitted: u32 = 0;
  /** @internal */ err: string | null = null;

  /** @internal */
  constructor(
    /** The group's index in the current call (what groupstate.group_begin received). */
    readonly index: i32,
    keyJson: string,
    private rowsAt: Array<usize>, // pairs of (offset, length) into the input
  ) {
    this.key = new Key(keyJson);
  }

  /** The number of rows; 0 on a timeout call. */
  get rowCount(): i32 { return this.rowsAt.length >> 1; }

  /** Row `i` (0-based, arrival order) as JSON text. Decoded from UTF-8 on every call. */
  row(i: i32): string {
    return String.UTF8.decodeUnsafe(this.rowsAt[i << 1], this.rowsAt[(i << 1) + 1]);
  }

  /** Row `i` parsed as an object (rows are always JSON objects). */
  rowObject(i: i32): JsonObject {
    return JsonObject.parse(this.row(i))!;
  }

  /** Emits one output row (a JSON document), copied at once into the result as UTF-8. */
  emit(json: string): void {
    outString(json);
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
