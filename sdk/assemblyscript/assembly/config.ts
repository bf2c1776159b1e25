// The deployment's configuration, handed to init hooks.

import { TimeoutMode } from "./group";
import { JsonObject, JsonKind } from "./json";
import { parseDuration } from "./time";

/** What gs_init received: the deployment's name, timeout mode, watermark flag and the spec's
 *  `config` section. Init hooks read it and report problems with fail(). */
export class Config {
  /** @internal */ err: string | null = null;

  /** @internal */
  constructor(
    /** The deployment's name. */
    readonly name: string,
    /** The deployment's timeout mode. */
    readonly timeoutMode: TimeoutMode,
    /** Whether the deployment has an event-time field, hence a watermark. */
    readonly hasWatermark: bool,
    /** The spec's `config` section as JSON text (`{}` when there is none). */
    readonly json: string,
    /** The `config` section parsed. */
    readonly obj: JsonObject,
  ) {}

  /** Whether `config` has a field `field`. */
  has(field: string): bool { return this.obj.has(field); }
  /** See JsonObject.getString. */
  getString(field: string): string | null { return this.obj.getString(field); }
  /** See JsonObject.getI64. */
  getI64(field: string, def: i64 = 0): i64 { return this.obj.getI64(field, def); }
  /** See JsonObject.getF64. */
  getF64(field: string, def: f64 = 0): f64 { return this.obj.getF64(field, def); }
  /** See JsonObject.getBool. */
  getBool(field: string, def: bool = false): bool { return this.obj.getBool(field, def); }

  /** `config.<field>` as a duration, in nanoseconds: a string in Go's time.ParseDuration
   *  syntax ("10s", "1m30s", "250ms") or a JSON number of **milliseconds** (as the Go SDK);
   *  `def` when the field is absent or null. Anything else fails the init, naming the field,
   *  and gives `def`. */
  durationNs(field: string, def: i64 = 0): i64 {
    const k = this.obj.kind(field);
    if (k == JsonKind.MISSING || k == JsonKind.NULL) return def;
    if (k == JsonKind.NUMBER) {
      const ns = this.obj.getF64(field) * 1e6;
      if (ns >= -9.2e18 && ns <= 9.2e18) return <i64>ns;
      this.fail("groupstate: config " + field + ": duration out of range: " + this.obj.getRaw(field)!);
      return def;
    }
    const s = this.obj.getString(field);
    if (s === null) {
      this.fail("groupstate: config " + field + ": want a duration string such as \"10s\" or a number of milliseconds, got " + this.obj.getRaw(field)!);
      return def;
    }
    const d = parseDuration(s);
    if (d === null) {
      this.fail("groupstate: config " + field + ": time: invalid duration \"" + s + "\"");
      return def;
    }
    return d.ns;
  }

  /** durationNs in whole milliseconds (truncated toward zero: "500us" is 0). */
  durationMs(field: string, defMs: i64 = 0): i64 {
    const k = this.obj.kind(field);
    if (k == JsonKind.MISSING || k == JsonKind.NULL) return defMs;
    return this.durationNs(field, defMs * 1000000) / 1000000;
  }

  /** Fails the init with `message` (the module is refused: `runtime: module init failed:
   *  <message>`). Keeps the first error. */
  fail(message: string): void {
    if (this.err === null) this.err = message.length > 0 ? message : "init failed";
  }

  /** The init error so far, or null. */
  get error(): string | null { return this.err; }
}
