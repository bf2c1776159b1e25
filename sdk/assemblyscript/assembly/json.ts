// A small JSON helper: read the fields of one object (JsonObject) and build output objects
// (JsonWriter). JsonObject parses UTF-8 bytes in place (rows are read straight from the
// input buffer, without decoding them to strings); values are decoded only when asked for.
// Nested objects and arrays are kept as raw text (getRaw, getObject).

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
  // Per field, 4 offsets from ptr: name start and end (quotes included), value start and end.
  private spans: StaticArray<u32> = EMPTY;
  private escapedNames: bool = false;

  private constructor(private data: ArrayBuffer | null, private ptr: usize, private len: usize) {}

  /** Parses `text`, which must be exactly one JSON object (whitespace around it is allowed);
   *  returns null when it is not. */
  static parse(text: string): JsonObject | null {
    const b = String.UTF8.encode(text, false, String.UTF8.ErrorMode.REPLACE);
    return JsonObject.parseBytes(b, changetype<usize>(b), <usize>b.byteLength);
  }

  /** @internal Parses the UTF-8 bytes at [ptr, ptr+len); `data`, if given, owns them. */
  static parseBytes(data: ArrayBuffer | null, ptr: usize, len: usize): JsonObject | null {
    const o = new JsonObject(data, ptr, len);
    const end = ptr + len;
    scratch.length = 0;
    let p = ws(ptr, end);
    if (p >= end || load<u8>(p) != 0x7b) return null; // {
    p = ws(p + 1, end);
    if (p < end && load<u8>(p) == 0x7d) {
      p++;
    } else {
      while (true) {
        const n0 = p;
        if (p >= end || load<u8>(p) != 0x22) return null;
        p = skipString(p, end);
        if (p == 0) return null;
        if (memchr(n0, p, 0x5c)) o.escapedNames = true;
        const n1 = p;
        p = ws(p, end);
        if (p >= end || load<u8>(p) != 0x3a) return null; // :
        p = ws(p + 1, end);
        const v0 = p;
        p = skipValue(p, end, 0);
        if (p == 0) return null;
        scratch.push(<u32>(n0 - ptr));
        scratch.push(<u32>(n1 - ptr));
        scratch.push(<u32>(v0 - ptr));
        scratch.push(<u32>(p - ptr));
        p = ws(p, end);
        if (p < end && load<u8>(p) == 0x2c) { p = ws(p + 1, end); continue; } // ,
        if (p < end && load<u8>(p) == 0x7d) { p++; break; }
        return null;
      }
    }
    if (ws(p, end) != end) return null;
    const n = scratch.length;
    if (n > 0) {
      const spans = new StaticArray<u32>(n);
      memory.copy(changetype<usize>(spans), scratch.dataStart, <usize>n << 2);
      o.spans = spans;
    }
    return o;
  }

  /** The object's text. */
  toString(): string { return String.UTF8.decodeUnsafe(this.ptr, this.len); }

  /** The number of fields (duplicates included). */
  get size(): i32 { return this.spans.length >> 2; }

  /** The decoded name of field `i`, in document order. */
  nameAt(i: i32): string {
    return decodeStringAt(this.ptr + this.spans[i << 2], this.ptr + this.spans[(i << 2) + 1]);
  }

  /** Whether the object has a field `name` (with any value, null included). */
  has(name: string): bool { return this.find(name) >= 0; }

  /** The type of field `name`'s value, MISSING when there is no such field. */
  kind(name: string): JsonKind { return this.kindAt(this.find(name)); }

  /** The raw JSON text of field `name`'s value, or null when there is no such field. */
  getRaw(name: string): string | null {
    const i = this.find(name);
    if (i < 0) return null;
    return String.UTF8.decodeUnsafe(this.valStart(i), this.valEnd(i) - this.valStart(i));
  }

  /** The decoded string value of field `name`, or null when it is missing or not a string. */
  getString(name: string): string | null {
    const i = this.find(name);
    if (this.kindAt(i) != JsonKind.STRING) return null;
    return decodeStringAt(this.valStart(i), this.valEnd(i));
  }

  /** Field `name` as an i64: an integer literal exactly, any other number truncated toward
   *  zero; `def` when it is missing, not a number, or out of the i64 range. */
  getI64(name: string, def: i64 = 0): i64 {
    const i = this.find(name);
    if (this.kindAt(i) != JsonKind.NUMBER) return def;
    return numberToI64(this.valStart(i), this.valEnd(i), def);
  }

  /** Field `name` as an f64; `def` when it is missing or not a number. */
  getF64(name: string, def: f64 = 0): f64 {
    const i = this.find(name);
    if (this.kindAt(i) != JsonKind.NUMBER) return def;
    return parseFloat(String.UTF8.decodeUnsafe(this.valStart(i), this.valEnd(i) - this.valStart(i)));
  }

  /** Field `name` as a bool; `def` when it is missing or not true/false. */
  getBool(name: string, def: bool = false): bool {
    const i = this.find(name);
    if (this.kindAt(i) != JsonKind.BOOL) return def;
    return load<u8>(this.valStart(i)) == 0x74;
  }

  /** Field `name` parsed as an object, or null when it is missing or not an object. */
  getObject(name: string): JsonObject | null {
    const i = this.find(name);
    if (this.kindAt(i) != JsonKind.OBJECT) return null;
    return JsonObject.parseBytes(this.data, this.valStart(i), this.valEnd(i) - this.valStart(i));
  }

  /** The raw JSON text of field `i`'s value, in document order. */
  rawAt(i: i32): string {
    return String.UTF8.decodeUnsafe(this.valStart(i), this.valEnd(i) - this.valStart(i));
  }

  @inline private valStart(i: i32): usize { return this.ptr + unchecked(this.spans[(i << 2) + 2]); }
  @inline private valEnd(i: i32): usize { return this.ptr + unchecked(this.spans[(i << 2) + 3]); }

  private kindAt(i: i32): JsonKind {
    if (i < 0) return JsonKind.MISSING;
    const c = load<u8>(this.valStart(i));
    if (c == 0x22) return JsonKind.STRING;
    if (c == 0x7b) return JsonKind.OBJECT;
    if (c == 0x5b) return JsonKind.ARRAY;
    if (c == 0x74 || c == 0x66) return JsonKind.BOOL;
    if (c == 0x6e) return JsonKind.NULL;
    return JsonKind.NUMBER;
  }

  // The index of the last field called `name` (the last one wins, as in most decoders), or -1.
  private find(name: string): i32 {
    const n = name.length;
    const s = changetype<usize>(name);
    let ascii = true;
    for (let k = 0; k < n; k++) if (load<u16>(s + (<usize>k << 1)) >= 0x80) { ascii = false; break; }
    if (!ascii || this.escapedNames) return this.findSlow(name);
    for (let i = (this.spans.length >> 2) - 1; i >= 0; i--) {
      const a = this.ptr + unchecked(this.spans[i << 2]) + 1;
      const b = this.ptr + unchecked(this.spans[(i << 2) + 1]) - 1;
      if (b - a != <usize>n) continue;
      let k: usize = 0;
      while (k < <usize>n && <u16>load<u8>(a + k) == load<u16>(s + (k << 1))) k++;
      if (k == <usize>n) return i;
    }
    return -1;
  }

  private findSlow(name: string): i32 {
    for (let i = (this.spans.length >> 2) - 1; i >= 0; i--) {
      if (this.nameAt(i) == name) return i;
    }
    return -1;
  }
}

const EMPTY = new StaticArray<u32>(0);
// Field offsets while parsing (reused).
const scratch = new Array<u32>(64);

/** Builds one JSON object without intermediate strings:
 *  `g.emit(new JsonWriter().raw("user_id", g.key.json).i64("n", n))`. */
export class JsonWriter {
  private buf: ArrayBuffer = new ArrayBuffer(128); // UTF-16 code units
  private len: i32 = 1;
  private n: i32 = 0;

  constructor() {
    store<u16>(changetype<usize>(this.buf), 0x7b); // {
  }

  /** Empties the writer, to build another object with the same buffer. */
  reset(): JsonWriter { this.len = 1; this.n = 0; return this; }

  /** Adds a string field (escaped). */
  str(name: string, v: string): JsonWriter { this.field(name); this.quoted(v); return this; }
  /** Adds an integer field. */
  i64(name: string, v: i64): JsonWriter { this.field(name); this.int(v); return this; }
  /** Adds a number field; NaN and infinities, which JSON cannot hold, are written as null. */
  f64(name: string, v: f64): JsonWriter {
    this.field(name);
    this.chars(isFinite(v) ? v.toString() : "null");
    return this;
  }
  /** Adds a boolean field. */
  bool(name: string, v: bool): JsonWriter { this.field(name); this.chars(v ? "true" : "false"); return this; }
  /** Adds a null field. */
  null(name: string): JsonWriter { this.field(name); this.chars("null"); return this; }
  /** Adds a field whose value is already JSON text (a key's `json`, a nested object, ...),
   *  written as it is. */
  raw(name: string, json: string): JsonWriter { this.field(name); this.chars(json); return this; }

  /** The object's text. The writer may be used further (fields are appended). */
  toString(): string {
    return String.UTF16.decodeUnsafe(this.seal(), <usize>(this.len + 1) << 1);
  }

  /** @internal Writes the closing brace after the text (not counted in `units`) and returns
   *  the text's address. */
  seal(): usize {
    this.reserve(1);
    store<u16>(changetype<usize>(this.buf) + (<usize>this.len << 1), 0x7d);
    return changetype<usize>(this.buf);
  }

  /** @internal The text's UTF-16 code units (without the closing brace) and their count. */
  get ptr(): usize { return changetype<usize>(this.buf); }
  /** @internal */ get units(): i32 { return this.len; }

  private field(name: string): void {
    if (this.n++ > 0) this.unit(0x2c);
    this.quoted(name);
    this.unit(0x3a);
  }

  private reserve(n: i32): void {
    const cap = this.buf.byteLength >> 1;
    if (this.len + n <= cap) return;
    const b = new ArrayBuffer(max(cap << 1, this.len + n) << 1);
    memory.copy(changetype<usize>(b), changetype<usize>(this.buf), <usize>this.len << 1);
    this.buf = b;
  }

  @inline private unit(c: u16): void {
    this.reserve(1);
    store<u16>(changetype<usize>(this.buf) + (<usize>this.len << 1), c);
    this.len++;
  }

  private chars(s: string): void {
    this.reserve(s.length);
    memory.copy(changetype<usize>(this.buf) + (<usize>this.len << 1), changetype<usize>(s), <usize>s.length << 1);
    this.len += s.length;
  }

  private int(v: i64): void {
    if (v < 0) this.unit(0x2d);
    let u: u64 = v < 0 ? <u64>(0 - v) : <u64>v; // i64.MIN_VALUE too
    let digits = 1;
    for (let t = u; t >= 10; t /= 10) digits++;
    this.reserve(digits);
    const at = changetype<usize>(this.buf) + (<usize>this.len << 1);
    for (let k = digits - 1; k >= 0; k--) {
      store<u16>(at + (<usize>k << 1), <u16>(0x30 + u % 10));
      u /= 10;
    }
    this.len += digits;
  }

  // Writes s as a JSON string: escapes ", \ and control characters; lone surrogates become
  // U+FFFD.
  private quoted(s: string): void {
    const n = s.length;
    this.reserve(n + 2);
    this.unit(0x22);
    for (let i = 0; i < n; i++) {
      const c = <u32>s.charCodeAt(i);
      if (c >= 0x20 && c != 0x22 && c != 0x5c && (c < 0xd800 || c >= 0xe000)) { this.unit(<u16>c); continue; }
      if (c == 0x22 || c == 0x5c) { this.unit(0x5c); this.unit(<u16>c); }
      else if (c == 0x0a) { this.unit(0x5c); this.unit(0x6e); }
      else if (c == 0x0d) { this.unit(0x5c); this.unit(0x72); }
      else if (c == 0x09) { this.unit(0x5c); this.unit(0x74); }
      else if (c < 0x20) { this.chars("\\u00"); this.unit(hexDigit(c >> 4)); this.unit(hexDigit(c & 15)); }
      else if (c < 0xdc00 && i + 1 < n && (s.charCodeAt(i + 1) & 0xfc00) == 0xdc00) {
        this.unit(<u16>c); this.unit(<u16>s.charCodeAt(++i)); // a valid pair
      } else this.unit(0xfffd);
    }
    this.unit(0x22);
  }
}

/** Returns `s` as a JSON string literal, quotes included (escaping as JsonWriter does). */
export function quote(s: string): string {
  const w = new JsonWriter();
  w.str("", s); // {"":"..."
  return String.UTF16.decodeUnsafe(w.ptr + 8, <usize>(w.units - 4) << 1);
}

@inline function hexDigit(d: u32): u16 { return <u16>(d < 10 ? 0x30 + d : 0x57 + d); }

// ---- scanning UTF-8 --------------------------------------------------------------------
// Each function returns the position after what it scanned, or 0 when it is not valid JSON.

function ws(p: usize, end: usize): usize {
  while (p < end) {
    const c = load<u8>(p);
    if (c != 0x20 && c != 0x0a && c != 0x0d && c != 0x09) break;
    p++;
  }
  return p;
}

function memchr(p: usize, end: usize, c: u8): bool {
  for (; p < end; p++) if (load<u8>(p) == c) return true;
  return false;
}

function skipString(p: usize, end: usize): usize {
  p++;
  while (p < end) {
    const c = load<u8>(p);
    if (c == 0x22) return p + 1;
    if (c < 0x20) return 0;
    if (c == 0x5c) {
      if (p + 1 >= end) return 0;
      const e = load<u8>(p + 1);
      if (e == 0x75) {
        if (p + 6 > end) return 0;
        for (let k = p + 2; k < p + 6; k++) if (hexValue(load<u8>(k)) < 0) return 0;
        p += 6;
        continue;
      }
      if (e != 0x22 && e != 0x5c && e != 0x2f && e != 0x62 && e != 0x66 && e != 0x6e && e != 0x72 && e != 0x74) return 0;
      p += 2;
      continue;
    }
    p++;
  }
  return 0;
}

function skipValue(p: usize, end: usize, depth: i32): usize {
  if (depth > 1000 || p >= end) return 0;
  const c = load<u8>(p);
  if (c == 0x22) return skipString(p, end);
  if (c == 0x7b || c == 0x5b) {
    const close: u8 = c == 0x7b ? 0x7d : 0x5d;
    p = ws(p + 1, end);
    if (p < end && load<u8>(p) == close) return p + 1;
    while (true) {
      if (c == 0x7b) {
        if (p >= end || load<u8>(p) != 0x22) return 0;
        p = skipString(p, end);
        if (p == 0) return 0;
        p = ws(p, end);
        if (p >= end || load<u8>(p) != 0x3a) return 0;
        p = ws(p + 1, end);
      }
      p = skipValue(p, end, depth + 1);
      if (p == 0) return 0;
      p = ws(p, end);
      if (p < end && load<u8>(p) == 0x2c) { p = ws(p + 1, end); continue; }
      if (p < end && load<u8>(p) == close) return p + 1;
      return 0;
    }
  }
  if (c == 0x74) return word(p, end, 0x65757274, 4); // true
  if (c == 0x6e) return word(p, end, 0x6c6c756e, 4); // null
  if (c == 0x66) return end - p >= 5 && load<u8>(p + 4) == 0x65 ? word(p, end, 0x736c6166, 5) : 0; // false
  return skipNumber(p, end);
}

// Matches the 4 bytes `w4` (little-endian) at p; `n` is the word's length (4 or 5).
function word(p: usize, end: usize, w4: u32, n: usize): usize {
  if (end - p < n || load<u32>(p) != w4) return 0;
  return p + n;
}

// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
function skipNumber(p: usize, end: usize): usize {
  if (p < end && load<u8>(p) == 0x2d) p++;
  if (p >= end) return 0;
  if (load<u8>(p) == 0x30) p++;
  else if (isDigit(p, end)) { while (isDigit(p, end)) p++; }
  else return 0;
  if (p < end && load<u8>(p) == 0x2e) {
    p++;
    if (!isDigit(p, end)) return 0;
    while (isDigit(p, end)) p++;
  }
  if (p < end && (load<u8>(p) | 0x20) == 0x65) {
    p++;
    if (p < end && (load<u8>(p) == 0x2b || load<u8>(p) == 0x2d)) p++;
    if (!isDigit(p, end)) return 0;
    while (isDigit(p, end)) p++;
  }
  return p;
}

@inline function isDigit(p: usize, end: usize): bool {
  return p < end && <u32>(load<u8>(p) - 0x30) < 10;
}

function hexValue(c: u32): i32 {
  if (c - 0x30 < 10) return c - 0x30;
  c |= 0x20;
  if (c - 0x61 < 6) return c - 0x57;
  return -1;
}

/** Decodes the (validated) JSON string literal at [p, end) of UTF-8, quotes included. Lone
 *  surrogate escapes become U+FFFD. */
function decodeStringAt(p: usize, end: usize): string {
  p++; end--;
  if (!memchr(p, end, 0x5c)) return String.UTF8.decodeUnsafe(p, end - p);
  // At most one UTF-16 unit per input byte.
  const out = new ArrayBuffer(<i32>(end - p) << 1);
  const o = changetype<usize>(out);
  let n: usize = 0;
  while (p < end) {
    const b = load<u8>(p);
    if (b != 0x5c) {
      // Copy the run of bytes up to the next escape, decoding UTF-8.
      let q = p;
      while (q < end && load<u8>(q) != 0x5c) q++;
      const s = String.UTF8.decodeUnsafe(p, q - p);
      memory.copy(o + (n << 1), changetype<usize>(s), <usize>s.length << 1);
      n += <usize>s.length;
      p = q;
      continue;
    }
    const e = load<u8>(p + 1);
    p += 2;
    let u: u32 = e;
    if (e == 0x75) {
      u = hex4(p);
      p += 4;
      if (u >= 0xd800 && u < 0xdc00 && p + 6 <= end && load<u8>(p) == 0x5c && load<u8>(p + 1) == 0x75) {
        const v = hex4(p + 2);
        if (v >= 0xdc00 && v < 0xe000) {
          store<u16>(o + (n << 1), <u16>u);
          store<u16>(o + (n << 1), <u16>v, 2);
          n += 2;
          p += 6;
          continue;
        }
      }
      if (u >= 0xd800 && u < 0xe000) u = 0xfffd;
    } else if (e == 0x6e) u = 0x0a;
    else if (e == 0x72) u = 0x0d;
    else if (e == 0x74) u = 0x09;
    else if (e == 0x62) u = 0x08;
    else if (e == 0x66) u = 0x0c;
    store<u16>(o + (n << 1), <u16>u);
    n++;
  }
  return String.UTF16.decodeUnsafe(o, n << 1);
}

/** @internal Decodes the JSON string literal `s` (quotes included). */
export function decodeString(s: string): string {
  const b = String.UTF8.encode(s, false, String.UTF8.ErrorMode.REPLACE);
  return decodeStringAt(changetype<usize>(b), changetype<usize>(b) + <usize>b.byteLength);
}

function hex4(p: usize): u32 {
  let v: u32 = 0;
  for (let k: usize = 0; k < 4; k++) v = v << 4 | <u32>hexValue(load<u8>(p + k));
  return v;
}

// Converts a (validated) JSON number at [p, end) to i64: integer literals exactly, others
// truncated; `def` when out of range.
function numberToI64(p: usize, end: usize, def: i64): i64 {
  if (memchr(p, end, 0x2e) || memchr(p, end, 0x65) || memchr(p, end, 0x45)) {
    const f = parseFloat(String.UTF8.decodeUnsafe(p, end - p));
    return f >= -9223372036854775808.0 && f < 9223372036854775808.0 ? <i64>f : def;
  }
  const neg = load<u8>(p) == 0x2d;
  if (neg) p++;
  let v: u64 = 0;
  for (; p < end; p++) {
    const d = <u64>(load<u8>(p) - 0x30);
    if (v > (0xFFFFFFFFFFFFFFFF - d) / 10) return def;
    v = v * 10 + d;
  }
  if (neg) return v > 0x8000000000000000 ? def : <i64>(0 - v);
  return v > 0x7FFFFFFFFFFFFFFF ? def : <i64>v;
}

// ---- raw JSON values (the v2 processor's initial state) ----------------------------------

/** @internal The elements of a JSON array as raw JSON texts, or null when `text` is not
 *  exactly one array. */
export function jsonArrayElements(text: string): Array<string> | null {
  const b = String.UTF8.encode(text, false, String.UTF8.ErrorMode.REPLACE);
  const ptr = changetype<usize>(b), end = ptr + <usize>b.byteLength;
  const out = new Array<string>();
  let p = ws(ptr, end);
  if (p >= end || load<u8>(p) != 0x5b) return null; // [
  p = ws(p + 1, end);
  if (p < end && load<u8>(p) == 0x5d) {
    p++;
  } else {
    while (true) {
      const v0 = p;
      p = skipValue(p, end, 0);
      if (p == 0) return null;
      out.push(String.UTF8.decodeUnsafe(v0, p - v0));
      p = ws(p, end);
      if (p < end && load<u8>(p) == 0x2c) { p = ws(p + 1, end); continue; } // ,
      if (p < end && load<u8>(p) == 0x5d) { p++; break; }
      return null;
    }
  }
  return ws(p, end) == end ? out : null;
}

/** @internal `text` (valid JSON) without the whitespace outside strings. */
export function jsonCompact(text: string): string {
  let out = "";
  let inStr = false, esc = false, run = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inStr) {
      if (esc) esc = false;
      else if (c == 0x5c) esc = true;
      else if (c == 0x22) inStr = false;
    } else if (c == 0x22) {
      inStr = true;
    } else if (c == 0x20 || c == 0x0a || c == 0x0d || c == 0x09) {
      out += text.substring(run, i);
      run = i + 1;
    }
  }
  return run == 0 ? text : out + text.substring(run);
}
