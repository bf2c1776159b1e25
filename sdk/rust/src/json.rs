//! A small, dependency-free JSON helper: enough to read the fields of an object (rows, state
//! values, the config) and to build flat output objects.
//!
//! Reading: [`Object::parse`] validates one complete JSON document (an object) and then looks
//! fields up by name, lazily; nested values are validated and can be reached through
//! [`Value::as_object`]. Like Go's `encoding/json`, a duplicated field name resolves to its
//! **last** occurrence, and a `null` field reads as absent (`Ok(None)`).
//!
//! Writing: [`ObjectWriter`] appends `"name":value` pairs to a reusable buffer that always holds
//! a complete object, so it can be passed straight to `emit` or `update`.

use std::borrow::Cow;

use crate::Error;

/// The maximum nesting of arrays and objects accepted (as in Go's `encoding/json`).
const MAX_DEPTH: usize = 10000;

/// The JSON type of a [`Value`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Null,
    Bool,
    Number,
    String,
    Array,
    Object,
}

/// One validated JSON value, borrowed from the document it was read from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Value<'a> {
    raw: &'a [u8],
}

/// A validated JSON object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Object<'a> {
    raw: &'a [u8], // from '{' to '}' inclusive, no surrounding white space
}

fn err(msg: impl Into<String>) -> Error {
    Error::new(crate::ErrorKind::Json, format!("json: {}", msg.into()))
}

impl<'a> Object<'a> {
    /// Parses `src`, which must be exactly one JSON object (surrounding white space allowed).
    pub fn parse(src: &'a [u8]) -> Result<Object<'a>, Error> {
        let v = Value::parse(src)?;
        v.as_object()
    }

    /// The object's bytes, as JSON.
    pub fn raw(&self) -> &'a [u8] {
        self.raw
    }

    /// The fields in document order (duplicates included).
    pub fn iter(&self) -> Fields<'a> {
        Fields { p: Scanner { b: self.raw, i: 1 }, done: false }
    }

    /// The value of field `name` (its last occurrence), or `None` when absent.
    pub fn get(&self, name: &str) -> Option<Value<'a>> {
        let mut found = None;
        for (k, v) in self.iter().raw_names() {
            if name_eq(k, name) {
                found = Some(v);
            }
        }
        found
    }

    /// Field `name` as a string (escapes decoded); `None` when absent or `null`.
    pub fn str(&self, name: &str) -> Result<Option<Cow<'a, str>>, Error> {
        self.typed(name, |v| v.as_str())
    }

    /// Field `name` as an integer; `None` when absent or `null`. See [`Value::as_i64`].
    pub fn i64(&self, name: &str) -> Result<Option<i64>, Error> {
        self.typed(name, |v| v.as_i64())
    }

    /// Field `name` as a double; `None` when absent or `null`.
    pub fn f64(&self, name: &str) -> Result<Option<f64>, Error> {
        self.typed(name, |v| v.as_f64())
    }

    /// Field `name` as a boolean; `None` when absent or `null`.
    pub fn bool(&self, name: &str) -> Result<Option<bool>, Error> {
        self.typed(name, |v| v.as_bool())
    }

    /// Field `name` as an object; `None` when absent or `null`.
    pub fn object(&self, name: &str) -> Result<Option<Object<'a>>, Error> {
        self.typed(name, |v| v.as_object())
    }

    fn typed<T>(
        &self,
        name: &str,
        f: impl FnOnce(Value<'a>) -> Result<T, Error>,
    ) -> Result<Option<T>, Error> {
        match self.get(name) {
            None => Ok(None),
            Some(v) if v.is_null() => Ok(None),
            Some(v) => f(v).map(Some).map_err(|e| err(format!("field {:?}: {}", name, strip(&e)))),
        }
    }
}

fn strip(e: &Error) -> String {
    let m = e.message();
    m.strip_prefix("json: ").unwrap_or(m).to_string()
}

/// Compares a raw JSON string token (quotes included) with `name`.
fn name_eq(raw: &[u8], name: &str) -> bool {
    let inner = &raw[1..raw.len() - 1];
    if !inner.contains(&b'\\') {
        return inner == name.as_bytes();
    }
    decode_string(raw).map(|s| s == name).unwrap_or(false)
}

/// Iterator over the fields of an [`Object`]: `(name, value)`.
pub struct Fields<'a> {
    p: Scanner<'a>,
    done: bool,
}

impl<'a> Fields<'a> {
    fn raw_names(self) -> RawFields<'a> {
        RawFields(self)
    }

    fn next_raw(&mut self) -> Option<(&'a [u8], Value<'a>)> {
        if self.done {
            return None;
        }
        // The object is validated: no error handling needed beyond stopping.
        let p = &mut self.p;
        p.ws();
        match p.peek() {
            Some(b',') => {
                p.i += 1;
                p.ws();
            }
            Some(b'}') | None => {
                self.done = true;
                return None;
            }
            _ => {}
        }
        let ks = p.i;
        if p.string().is_err() {
            self.done = true;
            return None;
        }
        let k = &p.b[ks..p.i];
        p.ws();
        p.i += 1; // ':'
        p.ws();
        let vs = p.i;
        if p.value().is_err() {
            self.done = true;
            return None;
        }
        Some((k, Value { raw: &p.b[vs..p.i] }))
    }
}

struct RawFields<'a>(Fields<'a>);

impl<'a> Iterator for RawFields<'a> {
    type Item = (&'a [u8], Value<'a>);
    fn next(&mut self) -> Option<Self::Item> {
        self.0.next_raw()
    }
}

impl<'a> Iterator for Fields<'a> {
    type Item = (Cow<'a, str>, Value<'a>);
    fn next(&mut self) -> Option<Self::Item> {
        let (k, v) = self.next_raw()?;
        Some((decode_string(k).unwrap_or(Cow::Borrowed("")), v))
    }
}

impl<'a> Value<'a> {
    /// Parses `src`, which must be exactly one JSON value (surrounding white space allowed).
    pub fn parse(src: &'a [u8]) -> Result<Value<'a>, Error> {
        if std::str::from_utf8(src).is_err() {
            return Err(err("invalid UTF-8"));
        }
        let mut p = Scanner { b: src, i: 0 };
        p.ws();
        let start = p.i;
        p.value()?;
        let end = p.i;
        p.ws();
        if p.i != src.len() {
            return Err(err(format!("invalid character after top-level value at offset {}", p.i)));
        }
        Ok(Value { raw: &src[start..end] })
    }

    /// The value's bytes, as JSON.
    pub fn raw(&self) -> &'a [u8] {
        self.raw
    }

    /// The value's JSON type.
    pub fn kind(&self) -> Kind {
        match self.raw[0] {
            b'n' => Kind::Null,
            b't' | b'f' => Kind::Bool,
            b'"' => Kind::String,
            b'[' => Kind::Array,
            b'{' => Kind::Object,
            _ => Kind::Number,
        }
    }

    pub fn is_null(&self) -> bool {
        self.kind() == Kind::Null
    }

    /// A string value, escapes decoded (borrowed when it has none). A lone surrogate escape
    /// becomes U+FFFD, as in Go.
    pub fn as_str(&self) -> Result<Cow<'a, str>, Error> {
        if self.kind() != Kind::String {
            return Err(self.want("a string"));
        }
        decode_string(self.raw)
    }

    /// A number as an `i64`: an integer literal in range, or any other number whose value is
    /// integral and in range (`2.0`, `1e3`).
    pub fn as_i64(&self) -> Result<i64, Error> {
        if self.kind() != Kind::Number {
            return Err(self.want("a number"));
        }
        let s = self.text();
        if let Ok(v) = s.parse::<i64>() {
            return Ok(v);
        }
        let f: f64 = s.parse().map_err(|_| self.want("an integer"))?;
        if f.fract() == 0.0 && f >= -9.223372036854775808e18 && f < 9.223372036854775808e18 {
            return Ok(f as i64);
        }
        Err(self.want("an integer in the int64 range"))
    }

    /// A number as an `f64` (correctly rounded).
    pub fn as_f64(&self) -> Result<f64, Error> {
        if self.kind() != Kind::Number {
            return Err(self.want("a number"));
        }
        self.text().parse::<f64>().map_err(|_| self.want("a number"))
    }

    /// A boolean.
    pub fn as_bool(&self) -> Result<bool, Error> {
        match self.raw {
            b"true" => Ok(true),
            b"false" => Ok(false),
            _ => Err(self.want("a boolean")),
        }
    }

    /// An object.
    pub fn as_object(&self) -> Result<Object<'a>, Error> {
        if self.kind() != Kind::Object {
            return Err(self.want("an object"));
        }
        Ok(Object { raw: self.raw })
    }

    /// The elements of an array.
    pub fn as_array(&self) -> Result<Elements<'a>, Error> {
        if self.kind() != Kind::Array {
            return Err(self.want("an array"));
        }
        Ok(Elements { p: Scanner { b: self.raw, i: 1 }, done: false })
    }

    fn text(&self) -> &'a str {
        // Validated as UTF-8 in parse.
        std::str::from_utf8(self.raw).unwrap_or("")
    }

    fn want(&self, what: &str) -> Error {
        let mut shown = String::from_utf8_lossy(self.raw).into_owned();
        if shown.len() > 40 {
            let mut cut = 40;
            while !shown.is_char_boundary(cut) {
                cut -= 1;
            }
            shown.truncate(cut);
            shown.push_str("...");
        }
        err(format!("want {}, got {}", what, shown))
    }
}

/// Iterator over the elements of an array [`Value`].
pub struct Elements<'a> {
    p: Scanner<'a>,
    done: bool,
}

impl<'a> Iterator for Elements<'a> {
    type Item = Value<'a>;
    fn next(&mut self) -> Option<Value<'a>> {
        if self.done {
            return None;
        }
        let p = &mut self.p;
        p.ws();
        match p.peek() {
            Some(b',') => {
                p.i += 1;
                p.ws();
            }
            Some(b']') | None => {
                self.done = true;
                return None;
            }
            _ => {}
        }
        let s = p.i;
        if p.value().is_err() {
            self.done = true;
            return None;
        }
        Some(Value { raw: &p.b[s..p.i] })
    }
}

/// A validating scanner over JSON text.
struct Scanner<'a> {
    b: &'a [u8],
    i: usize,
}

impl<'a> Scanner<'a> {
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.i += 1;
        }
    }

    fn fail<T>(&self, what: &str) -> Result<T, Error> {
        match self.peek() {
            None => Err(err(format!("unexpected end of input, {}", what))),
            Some(c) => Err(err(format!(
                "invalid character {:?} at offset {}, {}",
                c as char, self.i, what
            ))),
        }
    }

    fn expect(&mut self, c: u8, what: &str) -> Result<(), Error> {
        if self.peek() == Some(c) {
            self.i += 1;
            Ok(())
        } else {
            self.fail(what)
        }
    }

    /// Skips one value, iteratively (no recursion, so deep nesting cannot overflow the stack).
    fn value(&mut self) -> Result<(), Error> {
        // stack of open containers: true = object, false = array
        let mut stack: Vec<bool> = Vec::new();
        loop {
            // Expect a value.
            self.ws();
            match self.peek() {
                Some(b'{') | Some(b'[') => {
                    let obj = self.peek() == Some(b'{');
                    self.i += 1;
                    if stack.len() >= MAX_DEPTH {
                        return Err(err("exceeded max depth"));
                    }
                    stack.push(obj);
                    self.ws();
                    let close = if obj { b'}' } else { b']' };
                    if self.peek() == Some(close) {
                        self.i += 1;
                        stack.pop();
                    } else {
                        if obj {
                            self.member_name()?;
                        }
                        continue;
                    }
                }
                Some(b'"') => self.string()?,
                Some(b't') => self.literal(b"true")?,
                Some(b'f') => self.literal(b"false")?,
                Some(b'n') => self.literal(b"null")?,
                Some(b'-' | b'0'..=b'9') => self.number()?,
                _ => return self.fail("looking for beginning of value"),
            }
            // After a value: close containers or go on with the next element.
            loop {
                let obj = match stack.last() {
                    None => return Ok(()),
                    Some(&o) => o,
                };
                self.ws();
                match self.peek() {
                    Some(b',') => {
                        self.i += 1;
                        if obj {
                            self.ws();
                            self.member_name()?;
                        }
                        break;
                    }
                    Some(b'}') if obj => {
                        self.i += 1;
                        stack.pop();
                    }
                    Some(b']') if !obj => {
                        self.i += 1;
                        stack.pop();
                    }
                    _ => {
                        return self.fail(if obj {
                            "after object key:value pair"
                        } else {
                            "after array element"
                        })
                    }
                }
            }
        }
    }

    /// `"name" :`
    fn member_name(&mut self) -> Result<(), Error> {
        if self.peek() != Some(b'"') {
            return self.fail("looking for beginning of object key string");
        }
        self.string()?;
        self.ws();
        self.expect(b':', "after object key")
    }

    fn literal(&mut self, lit: &[u8]) -> Result<(), Error> {
        if self.b[self.i..].starts_with(lit) {
            self.i += lit.len();
            Ok(())
        } else {
            self.fail("in literal")
        }
    }

    fn digits(&mut self) -> usize {
        let s = self.i;
        while let Some(b'0'..=b'9') = self.peek() {
            self.i += 1;
        }
        self.i - s
    }

    fn number(&mut self) -> Result<(), Error> {
        if self.peek() == Some(b'-') {
            self.i += 1;
        }
        match self.peek() {
            Some(b'0') => self.i += 1,
            Some(b'1'..=b'9') => {
                self.digits();
            }
            _ => return self.fail("in numeric literal"),
        }
        if self.peek() == Some(b'.') {
            self.i += 1;
            if self.digits() == 0 {
                return self.fail("after decimal point in numeric literal");
            }
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.i += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.i += 1;
            }
            if self.digits() == 0 {
                return self.fail("in exponent of numeric literal");
            }
        }
        Ok(())
    }

    fn string(&mut self) -> Result<(), Error> {
        self.expect(b'"', "looking for beginning of string")?;
        loop {
            match self.peek() {
                None => return self.fail("in string literal"),
                Some(b'"') => {
                    self.i += 1;
                    return Ok(());
                }
                Some(b'\\') => {
                    self.i += 1;
                    match self.peek() {
                        Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => self.i += 1,
                        Some(b'u') => {
                            self.i += 1;
                            for _ in 0..4 {
                                match self.peek() {
                                    Some(c) if c.is_ascii_hexdigit() => self.i += 1,
                                    _ => return self.fail("in \\u hexadecimal character escape"),
                                }
                            }
                        }
                        _ => return self.fail("in string escape code"),
                    }
                }
                Some(c) if c < 0x20 => return self.fail("in string literal"),
                Some(_) => self.i += 1,
            }
        }
    }
}

fn hex4(b: &[u8]) -> Option<u32> {
    if b.len() < 4 {
        return None;
    }
    let s = std::str::from_utf8(&b[..4]).ok()?;
    u32::from_str_radix(s, 16).ok()
}

/// Decodes a validated JSON string token (quotes included).
fn decode_string(raw: &[u8]) -> Result<Cow<'_, str>, Error> {
    let inner = &raw[1..raw.len() - 1];
    if !inner.contains(&b'\\') {
        return std::str::from_utf8(inner).map(Cow::Borrowed).map_err(|_| err("invalid UTF-8"));
    }
    let mut out: Vec<u8> = Vec::with_capacity(inner.len());
    let mut i = 0;
    while i < inner.len() {
        let c = inner[i];
        if c != b'\\' {
            out.push(c);
            i += 1;
            continue;
        }
        let e = *inner.get(i + 1).ok_or_else(|| err("bad escape"))?;
        i += 2;
        let ch = match e {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            b'b' => '\u{8}',
            b'f' => '\u{c}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            b'u' => {
                let u = hex4(&inner[i..]).ok_or_else(|| err("bad \\u escape"))?;
                i += 4;
                if (0xD800..0xDC00).contains(&u) {
                    // A high surrogate: it needs a low one right after it.
                    let lo = if inner[i..].starts_with(b"\\u") { hex4(&inner[i + 2..]) } else { None };
                    match lo {
                        Some(lo) if (0xDC00..0xE000).contains(&lo) => {
                            i += 6;
                            char::from_u32(0x10000 + ((u - 0xD800) << 10) + (lo - 0xDC00))
                                .unwrap_or('\u{FFFD}')
                        }
                        _ => '\u{FFFD}',
                    }
                } else {
                    char::from_u32(u).unwrap_or('\u{FFFD}')
                }
            }
            _ => return Err(err("bad escape")),
        };
        let mut tmp = [0u8; 4];
        out.extend_from_slice(ch.encode_utf8(&mut tmp).as_bytes());
    }
    String::from_utf8(out).map(Cow::Owned).map_err(|_| err("invalid UTF-8"))
}

/// Appends `s` to `buf` as a JSON string, quotes included, with only the escapes JSON requires:
/// `\"`, `\\`, `\n`, `\r`, `\t` and `\u00xx` for the other control characters (the canonical
/// form of ABI section 5.1).
pub fn write_str(buf: &mut Vec<u8>, s: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    buf.push(b'"');
    let b = s.as_bytes();
    let mut start = 0;
    for (i, &c) in b.iter().enumerate() {
        let esc: &[u8] = match c {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            0..=0x1f => b"",
            _ => continue,
        };
        buf.extend_from_slice(&b[start..i]);
        if esc.is_empty() {
            buf.extend_from_slice(&[b'\\', b'u', b'0', b'0', HEX[(c >> 4) as usize], HEX[(c & 15) as usize]]);
        } else {
            buf.extend_from_slice(esc);
        }
        start = i + 1;
    }
    buf.extend_from_slice(&b[start..]);
    buf.push(b'"');
}

/// Appends `v` to `buf` as a JSON number (`null` when it is not finite).
pub fn write_f64(buf: &mut Vec<u8>, v: f64) {
    use std::io::Write;
    if v.is_finite() {
        let _ = write!(buf, "{}", v);
    } else {
        buf.extend_from_slice(b"null");
    }
}

/// Builds a JSON object in a reusable buffer. The buffer always holds a complete object
/// (`{}` to start with), so [`ObjectWriter::as_bytes`] is valid JSON at any time.
///
/// ```
/// let mut w = groupstate::json::ObjectWriter::new();
/// w.raw("user_id", b"\"alice\"").i64("total_logins", 2).bool("session_closed", true);
/// assert_eq!(w.as_bytes(), br#"{"user_id":"alice","total_logins":2,"session_closed":true}"#);
/// ```
#[derive(Clone, Debug)]
pub struct ObjectWriter {
    buf: Vec<u8>,
}

impl Default for ObjectWriter {
    fn default() -> Self {
        Self::new()
    }
}

impl ObjectWriter {
    pub fn new() -> ObjectWriter {
        ObjectWriter { buf: b"{}".to_vec() }
    }

    /// Empties the object, keeping the buffer's capacity.
    pub fn clear(&mut self) -> &mut Self {
        self.buf.clear();
        self.buf.extend_from_slice(b"{}");
        self
    }

    /// Starts field `name`; the caller appends the value and then `}`.
    fn name(&mut self, name: &str) -> &mut Vec<u8> {
        self.buf.pop(); // '}'
        if self.buf.len() > 1 {
            self.buf.push(b',');
        }
        write_str(&mut self.buf, name);
        self.buf.push(b':');
        &mut self.buf
    }

    /// Adds a string field (escaped).
    pub fn str(&mut self, name: &str, v: &str) -> &mut Self {
        write_str(self.name(name), v);
        self.buf.push(b'}');
        self
    }

    /// Adds an integer field.
    pub fn i64(&mut self, name: &str, v: i64) -> &mut Self {
        use std::io::Write;
        let _ = write!(self.name(name), "{}", v);
        self.buf.push(b'}');
        self
    }

    /// Adds a number field (`null` when `v` is not finite).
    pub fn f64(&mut self, name: &str, v: f64) -> &mut Self {
        write_f64(self.name(name), v);
        self.buf.push(b'}');
        self
    }

    /// Adds a boolean field.
    pub fn bool(&mut self, name: &str, v: bool) -> &mut Self {
        self.name(name).extend_from_slice(if v { b"true" } else { b"false" });
        self.buf.push(b'}');
        self
    }

    /// Adds a `null` field.
    pub fn null(&mut self, name: &str) -> &mut Self {
        self.name(name).extend_from_slice(b"null");
        self.buf.push(b'}');
        self
    }

    /// Adds a field whose value is `json`, copied as it is: it must be one valid JSON value
    /// (a key's [`crate::Key::json`], a [`Value::raw`], another writer's bytes).
    pub fn raw(&mut self, name: &str, json: &[u8]) -> &mut Self {
        self.name(name).extend_from_slice(json);
        self.buf.push(b'}');
        self
    }

    /// The object, as JSON.
    pub fn as_bytes(&self) -> &[u8] {
        &self.buf
    }
}

impl AsRef<[u8]> for ObjectWriter {
    fn as_ref(&self) -> &[u8] {
        &self.buf
    }
}
