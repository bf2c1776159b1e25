// Durations ("10s", "1m30s", "250ms", as Go's time.ParseDuration) and RFC 3339 timestamps.

/** A parsed duration. */
export class Duration {
  constructor(readonly ns: i64) {}
  /** Whole milliseconds, truncated toward zero (0.5 ms is 0). */
  get ms(): i64 { return this.ns / 1000000; }
}

/** Parses a duration in Go's time.ParseDuration syntax: an optional sign, then one or more
 *  decimal numbers each with a unit (ns, us, µs, ms, s, m, h), e.g. "10s", "1.5h", "1m30s";
 *  "0" alone is allowed. Returns null when `s` is not one, or overflows 2^63 - 1 ns. */
export function parseDuration(s: string): Duration | null {
  let i = 0;
  const n = s.length;
  let neg = false;
  if (i < n && (s.charCodeAt(i) == 0x2d || s.charCodeAt(i) == 0x2b)) {
    neg = s.charCodeAt(i) == 0x2d;
    i++;
  }
  if (s.substring(i) == "0") return new Duration(0);
  if (i == n) return null;
  let total: u64 = 0;
  while (i < n) {
    // integer part
    let v: u64 = 0;
    let digits = 0;
    let overflow = false;
    while (i < n && isDigit(s.charCodeAt(i))) {
      const d = <u64>(s.charCodeAt(i) - 0x30);
      if (v > (0x7FFFFFFFFFFFFFFF - d) / 10) overflow = true;
      else v = v * 10 + d;
      i++; digits++;
    }
    if (overflow) return null;
    // fraction
    let f: u64 = 0;
    let scale: f64 = 1;
    if (i < n && s.charCodeAt(i) == 0x2e) {
      i++;
      while (i < n && isDigit(s.charCodeAt(i))) {
        if (f < 100000000000000000) { // keep 17 significant digits
          f = f * 10 + <u64>(s.charCodeAt(i) - 0x30);
          scale *= 10;
        }
        i++; digits++;
      }
    }
    if (digits == 0) return null;
    // unit
    const u0 = i;
    while (i < n) {
      const c = s.charCodeAt(i);
      if (c == 0x2e || isDigit(c)) break;
      i++;
    }
    const unit = unitNs(s.substring(u0, i));
    if (unit == 0) return null;
    if (v > 0x7FFFFFFFFFFFFFFF / unit) return null;
    v *= unit;
    if (f > 0) {
      v += <u64>(<f64>f * (<f64>unit / scale));
      if (v > 0x7FFFFFFFFFFFFFFF) return null;
    }
    total += v;
    if (total > 0x7FFFFFFFFFFFFFFF) return null;
  }
  return new Duration(neg ? -<i64>total : <i64>total);
}

function unitNs(u: string): u64 {
  if (u == "ns") return 1;
  if (u == "us" || u == "\u00b5s" || u == "\u03bcs") return 1000;
  if (u == "ms") return 1000000;
  if (u == "s") return 1000000000;
  if (u == "m") return 60000000000;
  if (u == "h") return 3600000000000;
  return 0;
}

/** A point in time, in milliseconds since the Unix epoch. */
export class Timestamp {
  constructor(readonly ms: i64) {}
}

/** Parses an RFC 3339 timestamp as Go's time.Parse(time.RFC3339Nano, s) does:
 *  `YYYY-MM-DDTHH:MM:SS[.fraction](Z|+HH:MM|-HH:MM)`. The result is truncated to whole
 *  milliseconds (toward the past). Returns null when `s` is not such a timestamp. */
export function parseRFC3339(s: string): Timestamp | null {
  if (s.length < 20) return null;
  const y = num(s, 0, 4), mo = num(s, 5, 2), d = num(s, 8, 2);
  const h = num(s, 11, 2), mi = num(s, 14, 2), sec = num(s, 17, 2);
  if (y < 0 || mo < 1 || mo > 12 || d < 1 || d > daysIn(y, mo) || h < 0 || h > 23 || mi < 0 || mi > 59 || sec < 0 || sec > 59) return null;
  if (s.charCodeAt(4) != 0x2d || s.charCodeAt(7) != 0x2d || s.charCodeAt(10) != 0x54 || s.charCodeAt(13) != 0x3a || s.charCodeAt(16) != 0x3a) return null;
  let i = 19;
  let fracMs: i64 = 0;
  if (s.charCodeAt(i) == 0x2e || s.charCodeAt(i) == 0x2c) {
    i++;
    const f0 = i;
    while (i < s.length && isDigit(s.charCodeAt(i))) {
      if (i - f0 < 3) fracMs = fracMs * 10 + <i64>(s.charCodeAt(i) - 0x30);
      i++;
    }
    if (i == f0) return null;
    for (let k = i - f0; k < 3; k++) fracMs *= 10;
  }
  let offset: i64 = 0;
  if (i < s.length && s.charCodeAt(i) == 0x5a && i + 1 == s.length) { // Z
    offset = 0;
  } else if (i + 6 == s.length && (s.charCodeAt(i) == 0x2b || s.charCodeAt(i) == 0x2d) && s.charCodeAt(i + 3) == 0x3a) {
    const oh = num(s, i + 1, 2), om = num(s, i + 4, 2);
    if (oh < 0 || oh > 23 || om < 0 || om > 59) return null;
    offset = <i64>(oh * 3600 + om * 60);
    if (s.charCodeAt(i) == 0x2d) offset = -offset;
  } else {
    return null;
  }
  const days = daysFromCivil(y, mo, d);
  const secs = days * 86400 + <i64>(h * 3600 + mi * 60 + sec) - offset;
  return new Timestamp(secs * 1000 + fracMs);
}

// The decimal number in s[at, at+len), or -1.
function num(s: string, at: i32, len: i32): i32 {
  let v = 0;
  for (let k = at; k < at + len; k++) {
    const c = s.charCodeAt(k);
    if (!isDigit(c)) return -1;
    v = v * 10 + (c - 0x30);
  }
  return v;
}

function daysIn(y: i32, m: i32): i32 {
  if (m == 2) return (y % 4 == 0 && (y % 100 != 0 || y % 400 == 0)) ? 29 : 28;
  return m == 4 || m == 6 || m == 9 || m == 11 ? 30 : 31;
}

// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
function daysFromCivil(y0: i32, m: i32, d: i32): i64 {
  const y = <i64>(m <= 2 ? y0 - 1 : y0);
  const era = (y >= 0 ? y : y - 399) / 400;
  const yoe = y - era * 400;
  const mp = <i64>((m + 9) % 12);
  const doy = (153 * mp + 2) / 5 + <i64>d - 1;
  const doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

function isDigit(c: i32): bool { return c >= 0x30 && c <= 0x39; }
