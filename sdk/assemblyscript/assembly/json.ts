// A small JSON helper: read the fields of one object (JsonObject) and build output objects
// (JsonWriter). It works on AssemblyScript strings; nested objects and arrays are kept as raw
// text (getRaw, getObject).

/** The type of a field's value. */
export enum JsonKind {
  MISSING = 0,
  NULL = 1,
  BOOL = 2,
  NUMBER = 3,
  STRING = 4,
  OBJECT = 5,
  ARRAY = 6,
}

/** The fields of one JSON object, parsed once; values are decoded on demand. */
export class JsonObject {
  /** The text the object was parsed from. */
  readonly text: string;
  private names: Array<string> = new Array<string>();
  private starts: Array<i32> = new Array<i32>();
  private ends: Array<i32> = new Array<i32>();

  private constructor(text: string) {
    this.text = text;
  }

  /** Parses `text`, which must be exactly one JSON object (whitespace around it is allowed);
   *  returns null when it is not. */
  static parse(text: string): JsonObject | null {
    const o = new JsonObject(text);
    const p = new Parser(text);
    p.ws();
    if (!p.peek(0x7b)) return null; // {
    p.pos++;
    p.ws();
    if (p.peek(0x7d)) { // }
      p.pos++;
    } else {
      while (true) {
        p.ws();
        const nameAt = p.pos;
        if (!p.peek(0x22) || !p.skipString()) return null;
        const name = decodeString(text, nameAt, p.pos);
        p.ws();
        if (!p.peek(0x3a)) return null; // :
        p.pos++;
        p.ws();
        const start = p.pos;
        if (!p.skipValue(0)) return null;
        o.names.push(name);
        o.starts.push(start);
        o.ends.push(p.pos);
        p.ws();
        if (p.peek(0x2c)) { p.pos++; continue; } // ,
        if (p.peek(0x7d)) { p.pos++; break; }
        return null;
      }
    }
    p.ws();
    return p.pos == text.length ? o : null;
  }

  /** The number of fields (duplicates included). */
  get size(): i32 { return this.names.length; }

  /** The name of field `i`, in document order. */
  nameAt(i: i32): string { return this.names[i]; }

  /** Whether the object has a field `name` (with any value, null included). */
  has(name: string): bool { return this.find(name) >= 0; }

  /** The type of field `name`'s value, MISSING when there is no such field. */
  kind(name: string): JsonKind {
    const i = this.find(name);
    if (i < 0) return JsonKind.MISSING;
    const c = this.text.charCodeAt(this.starts[i]);
    if (c == 0x22) return JsonKind.STRING;
    if (c == 0x7b) return JsonKind.OBJECT;
    if (c == 0x5b) return JsonKind.ARRAY;
    if (c == 0x74 || c == 0x66) return JsonKind.BOOL;
    if (c == 0x6e) return JsonKind.NULL;
    return JsonKind.NUMBER;
  }

  /** The raw JSON text of field `name`'s value, or null when there is no such field. */
  getRaw(name: string): string | null {
    const i = this.find(name);
    return i < 0 ? null : this.text.substring(this.starts[i], this.ends[i]);
  }

  /** The decoded string value of field `name`, or null when it is missing or not a string. */
  getString(name: string): string | null {
    const i = this.find(name);
    if (i < 0 || this.text.charCodeAt(this.starts[i]) != 0x22) return null;
    return decodeString(this.text, this.starts[i], this.ends[i]);
  }

  /** Field `name` as an i64: an integer literal exactly, any other number truncated toward
   *  zero; `def` when it is missing, not a number, or out of the i64 range. */
  getI64(name: string, def: i64 = 0): i64 {
    const i = this.find(name);
    if (i < 0 || this.kind(name) != JsonKind.NUMBER) return def;
    return numberToI64(this.text.substring(this.starts[i], this.ends[i]), def);
  }

  /** Field `name` as an f64; `def` when it is missing or not a number. */
  getF64(name: string, def: f64 = 0): f64 {
    const i = this.find(name);
    if (i < 0 || this.kind(name) != JsonKind.NUMBER) return def;
    return parseFloat(this.text.substring(this.starts[i], this.ends[i]));
  }

  /** Field `name` as a bool; `def` when it is missing or not true/false. */
  getBool(name: string, def: bool = false): bool {
    const i = this.find(name);
    if (i < 0) return def;
    const c = this.text.charCodeAt(this.starts[i]);
    return c == 0x74 ? true : c == 0x66 ? false : def;
  }

  /** Field `name` parsed as an object, or null when it is missing or not an object. */
  getObject(name: string): JsonObject | null {
    if (this.kind(name) != JsonKind.OBJECT) return null;
    return JsonObject.parse(this.getRaw(name)!);
  }

  // The last field of that name wins, as in most JSON decoders.
  private find(name: string): i32 {
    for (let i = this.names.length - 1; i >= 0; i--) {
      if (this.names[i] == name) return i;
    }
    return -1;
  }
}

/** Builds one JSON object: `new JsonWriter().str("a", s).i64("n", 1).toString()`. */
export class JsonWriter {
  private s: string = "{";
  private n: i32 = 0;

  private field(name: string): void {
    if (this.n++ > 0) this.s += ",";
    this.s += quote(name) + ":";
  }

  /** Adds a string field (escaped). */
  str(name: string, v: string): JsonWriter { this.field(name); this.s += quote(v); return this; }
  /** Adds an integer field. */
  i64(name: string, v: i64): JsonWriter { this.field(name); this.s += v.toString(); return this; }
  /** Adds a number field; NaN and infinities, which JSON cannot hold, are written as null. */
  f64(name: string, v: f64): JsonWriter {
    this.field(name);
    this.s += isFinite(v) ? v.toString() : "null";
    return this;
  }
  /** Adds a boolean field. */
  bool(name: string, v: bool): JsonWriter { this.field(name); this.s += v ? "true" : "false"; return this; }
  /** Adds a null field. */
  null(name: string): JsonWriter { this.field(name); this.s += "null"; return this; }
  /** Adds a field whose value is already JSON text (a key's `json`, a nested object, ...),
   *  written as it is. */
  raw(name: string, json: string): JsonWriter { this.field(name); this.s += json; return this; }

  /** The object's text. The writer may be used further (fields are appended). */
  toString(): string { return this.s + "}"; }
}

/** Returns `s` as a JSON string literal, quotes included. Escapes `"`, `\` and control
 *  characters; lone surrogates become U+FFFD. */
export function quote(s: string): string {
  let out = "\"";
  let from = 0;
  const n = s.length;
  for (let i = 0; i < n; i++) {
    const c = s.charCodeAt(i);
    let esc: string | null = null;
    if (c == 0x22) esc = "\\\"";
    else if (c == 0x5c) esc = "\\\\";
    else if (c == 0x0a) esc = "\\n";
    else if (c == 0x0d) esc = "\\r";
    else if (c == 0x09) esc = "\\t";
    else if (c < 0x20) esc = "\\u00" + HEX.charAt(c >> 4) + HEX.charAt(c & 15);
    else if (c >= 0xd800 && c < 0xe000) {
      if (c < 0xdc00 && i + 1 < n) {
        const d = s.charCodeAt(i + 1);
        if (d >= 0xdc00 && d < 0xe000) { i++; continue; } // a valid pair
      }
      esc = "\ufffd";
    }
    if (esc !== null) {
      out += s.substring(from, i) + esc;
      from = i + 1;
    }
  }
  return out + s.substring(from) + "\"";
}

const HEX = "0123456789abcdef";

/** Decodes the JSON string literal at text[start, end) (quotes included, already validated).
 *  Lone surrogate escapes become U+FFFD. */
export function decodeString(text: string, start: i32, end: i32): string {
  start++; end--;
  const b = text.indexOf("\\", start);
  if (b < 0 || b >= end) return text.substring(start, end);
  let out = "";
  let from = start;
  let i = start;
  while (i < end) {
    if (text.charCodeAt(i) != 0x5c) { i++; continue; }
    out += text.substring(from, i);
    const e = text.charCodeAt(i + 1);
    i += 2;
    if (e == 0x75) { // \uXXXX
      let u = hex4(text, i);
      i += 4;
      if (u >= 0xd800 && u < 0xdc00 && i + 6 <= end && text.charCodeAt(i) == 0x5c && text.charCodeAt(i + 1) == 0x75) {
        const v = hex4(text, i + 2);
        if (v >= 0xdc00 && v < 0xe000) {
          out += String.fromCharCode(u) + String.fromCharCode(v);
          i += 6;
          from = i;
          continue;
        }
      }
      if (u >= 0xd800 && u < 0xe000) u = 0xfffd;
      out += String.fromCharCode(u);
    } else if (e == 0x6e) out += "\n";
    else if (e == 0x72) out += "\r";
    else if (e == 0x74) out += "\t";
    else if (e == 0x62) out += "\b";
    else if (e == 0x66) out += "\f";
    else out += String.fromCharCode(e); // " \ /
    from = i;
  }
  return out + text.substring(from, end);
}

function hex4(s: string, i: i32): i32 {
  let v = 0;
  for (let k = 0; k < 4; k++) {
    const c = s.charCodeAt(i + k);
    v = v << 4 | (c <= 0x39 ? c - 0x30 : (c | 0x20) - 0x57);
  }
  return v;
}

/** Converts a JSON number's text to i64: integer literals exactly, others truncated. */
export function numberToI64(t: string, def: i64): i64 {
  let integer = true;
  for (let k = 0; k < t.length; k++) {
    const c = t.charCodeAt(k);
    if (c == 0x2e || c == 0x65 || c == 0x45) { integer = false; break; }
  }
  if (!integer) {
    const f = parseFloat(t);
    return f >= -9223372036854775808.0 && f < 9223372036854775808.0 ? <i64>f : def;
  }
  const neg = t.charCodeAt(0) == 0x2d;
  let v: u64 = 0;
  for (let k = neg ? 1 : 0; k < t.length; k++) {
    const d = <u64>(t.charCodeAt(k) - 0x30);
    if (v > (0xFFFFFFFFFFFFFFFF - d) / 10) return def;
    v = v * 10 + d;
  }
  if (neg) return v > 0x8000000000000000 ? def : <i64>(0 - v);
  return v > 0x7FFFFFFFFFFFFFFF ? def : <i64>v;
}

// A validating scanner over a string.
class Parser {
  pos: i32 = 0;
  constructor(public s: string) {}

  peek(c: i32): bool { return this.pos < this.s.length && this.s.charCodeAt(this.pos) == c; }

  ws(): void {
    while (this.pos < this.s.length) {
      const c = this.s.charCodeAt(this.pos);
      if (c != 0x20 && c != 0x0a && c != 0x0d && c != 0x09) break;
      this.pos++;
    }
  }

  skipValue(depth: i32): bool {
    if (depth > 1000 || this.pos >= this.s.length) return false;
    const c = this.s.charCodeAt(this.pos);
    if (c == 0x22) return this.skipString();
    if (c == 0x7b || c == 0x5b) {
      const close = c == 0x7b ? 0x7d : 0x5d;
      this.pos++;
      this.ws();
      if (this.peek(close)) { this.pos++; return true; }
      while (true) {
        this.ws();
        if (c == 0x7b) {
          if (!this.peek(0x22) || !this.skipString()) return false;
          this.ws();
          if (!this.peek(0x3a)) return false;
          this.pos++;
          this.ws();
        }
        if (!this.skipValue(depth + 1)) return false;
        this.ws();
        if (this.peek(0x2c)) { this.pos++; continue; }
        if (this.peek(close)) { this.pos++; return true; }
        return false;
      }
    }
    if (c == 0x74) return this.word("true");
    if (c == 0x66) return this.word("false");
    if (c == 0x6e) return this.word("null");
    return this.skipNumber();
  }

  private word(w: string): bool {
    if (this.s.substring(this.pos, this.pos + w.length) != w) return false;
    this.pos += w.length;
    return true;
  }

  skipString(): bool {
    const s = this.s;
    let i = this.pos + 1;
    while (i < s.length) {
      const c = s.charCodeAt(i);
      if (c == 0x22) { this.pos = i + 1; return true; }
      if (c < 0x20) return false;
      if (c == 0x5c) {
        if (i + 1 >= s.length) return false;
        const e = s.charCodeAt(i + 1);
        if (e == 0x75) {
          if (i + 6 > s.length) return false;
          for (let k = i + 2; k < i + 6; k++) {
            const h = s.charCodeAt(k) | 0x20;
            if (!((h >= 0x30 && h <= 0x39) || (h >= 0x61 && h <= 0x66))) return false;
          }
          i += 6;
          continue;
        }
        if (e != 0x22 && e != 0x5c && e != 0x2f && e != 0x62 && e != 0x66 && e != 0x6e && e != 0x72 && e != 0x74) return false;
        i += 2;
        continue;
      }
      i++;
    }
    return false;
  }

  // -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
  private skipNumber(): bool {
    const s = this.s;
    let i = this.pos;
    if (i < s.length && s.charCodeAt(i) == 0x2d) i++;
    if (i >= s.length) return false;
    if (s.charCodeAt(i) == 0x30) i++;
    else if (isDigit(s, i)) { while (isDigit(s, i)) i++; }
    else return false;
    if (i < s.length && s.charCodeAt(i) == 0x2e) {
      i++;
      if (!isDigit(s, i)) return false;
      while (isDigit(s, i)) i++;
    }
    if (i < s.length && (s.charCodeAt(i) | 0x20) == 0x65) {
      i++;
      if (i < s.length && (s.charCodeAt(i) == 0x2b || s.charCodeAt(i) == 0x2d)) i++;
      if (!isDigit(s, i)) return false;
      while (isDigit(s, i)) i++;
    }
    this.pos = i;
    return true;
  }
}

function isDigit(s: string, i: i32): bool {
  if (i >= s.length) return false;
  const c = s.charCodeAt(i);
  return c >= 0x30 && c <= 0x39;
}
