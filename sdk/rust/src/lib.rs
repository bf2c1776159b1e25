//! groupstate handler SDK for Rust: write a `flatMapGroupsWithState` function, build it as a
//! WebAssembly module (ABI v1, `abi/README.md`), run it with `groupstate`.
//!
//! No dependencies, Rust 1.63+, built with plain `rustc` for `wasm32-wasi` (or
//! `wasm32-unknown-unknown`) as a `cdylib`, which is a reactor module: it has no `_start`.
//!
//! ```ignore
//! use groupstate::{json, Config, Emitter, Error, GroupState, Handler, Key, Rows};
//!
//! struct Count;
//!
//! impl Handler for Count {
//!     fn init(_config: &Config) -> Result<Self, Error> {
//!         Ok(Count)
//!     }
//!     fn handle(&mut self, key: &Key, rows: Rows, state: &mut GroupState, out: &mut Emitter)
//!         -> Result<(), Error> {
//!         let n = match state.get_option() {
//!             Some(v) => json::Object::parse(v)?.i64("n")?.unwrap_or(0),
//!             None => 0,
//!         } + rows.len() as i64;
//!         let mut w = json::ObjectWriter::new();
//!         state.update(w.i64("n", n))?;
//!         out.emit(w.clear().raw("key", key.json()).i64("n", n));
//!         Ok(())
//!     }
//! }
//!
//! groupstate::export!(Count);
//! ```
//!
//! See `docs/handlers/rust.md` for the guide.

use std::borrow::Cow;
use std::fmt;
use std::time::Duration;

mod duration;
pub mod json;
mod rt;
pub mod time;

#[cfg(test)]
mod tests;

/// The ABI version this SDK implements.
pub const ABI_VERSION: u32 = 1;

// ---------------------------------------------------------------------------------------------
// Errors

/// What kind of failure an [`Error`] is; the state handle's misuse errors are distinct kinds so
/// a handler can match them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// `get` without a value.
    NoState,
    /// `update` with no value (`None`).
    NullState,
    /// `set_timeout_duration` without `timeout: processing_time`.
    DurationNotAllowed,
    /// `set_timeout_duration` with less than 1 ms.
    NonPositiveDuration,
    /// The processing time plus the duration overflows `i64`.
    DurationOverflow,
    /// `set_timeout_timestamp` without `timeout: event_time`.
    TimestampNotAllowed,
    /// `set_timeout_timestamp` with a timestamp `<= 0`.
    NonPositiveTimestamp,
    /// `set_timeout_timestamp` earlier than the watermark.
    TimestampBeforeWatermark,
    /// `current_watermark_ms` without an event-time column.
    NoWatermark,
    /// Malformed JSON, or a field of the wrong type.
    Json,
    /// A bad config value.
    Config,
    /// Anything else: the handler's own errors.
    Handler,
}

/// The error type of the SDK and of handlers. Its message becomes the group's error (what a
/// dead letter carries).
#[derive(Clone, PartialEq, Eq)]
pub struct Error {
    kind: ErrorKind,
    msg: String,
}

impl Error {
    /// An error of `kind` with message `msg`.
    pub fn new(kind: ErrorKind, msg: impl Into<String>) -> Error {
        Error { kind, msg: msg.into() }
    }

    /// A handler error from anything printable: `.map_err(Error::msg)`.
    pub fn msg(m: impl fmt::Display) -> Error {
        Error::new(ErrorKind::Handler, m.to_string())
    }

    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    pub fn message(&self) -> &str {
        &self.msg
    }

    fn gs(kind: ErrorKind, msg: &str) -> Error {
        Error::new(kind, format!("groupstate: {}", msg))
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.msg)
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Error({:?}, {:?})", self.kind, self.msg)
    }
}

impl std::error::Error for Error {}

impl From<String> for Error {
    fn from(m: String) -> Error {
        Error::new(ErrorKind::Handler, m)
    }
}

impl From<&str> for Error {
    fn from(m: &str) -> Error {
        Error::new(ErrorKind::Handler, m)
    }
}

// ---------------------------------------------------------------------------------------------
// Config

/// The deployment's timeout mode (`timeout:` in the spec).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeoutMode {
    None = 0,
    ProcessingTime = 1,
    EventTime = 2,
}

/// What the module learns once per instance: the deployment's name, timeout mode, whether it
/// has a watermark, and the spec's `config` section (a JSON object).
#[derive(Clone, Debug)]
pub struct Config {
    name: String,
    mode: TimeoutMode,
    has_watermark: bool,
    json: Vec<u8>,
}

impl Config {
    /// A config, for native tests of a handler (`json` must be a JSON object).
    pub fn new(name: &str, mode: TimeoutMode, has_watermark: bool, json: &[u8]) -> Result<Config, Error> {
        json::Object::parse(json)
            .map_err(|e| Error::gs(ErrorKind::Config, &format!("config is not a JSON object: {}", e)))?;
        Ok(Config { name: name.to_string(), mode, has_watermark, json: json.to_vec() })
    }

    /// The deployment's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn timeout_mode(&self) -> TimeoutMode {
        self.mode
    }

    /// Whether the spec configures `event_time` (so [`GroupState::current_watermark_ms`] works).
    pub fn has_watermark(&self) -> bool {
        self.has_watermark
    }

    /// The `config` section as JSON (`{}` when the spec has none).
    pub fn json(&self) -> &[u8] {
        &self.json
    }

    /// The `config` section, to read fields: `config.object().i64("max")?`.
    pub fn object(&self) -> json::Object<'_> {
        // Validated when the Config was made.
        json::Object::parse(&self.json).expect("config validated at init")
    }

    /// Field `field` as a duration: a Go duration string (`"10s"`, `"1m30s"`, `"250ms"`) or a
    /// JSON number of **milliseconds**. `Ok(None)` when absent or `null`. Negative durations are
    /// an error. The error names the field:
    /// `groupstate: config idle_timeout: time: invalid duration "soon"`.
    pub fn duration(&self, field: &str) -> Result<Option<Duration>, Error> {
        let bad = |m: String| Error::gs(ErrorKind::Config, &format!("config {}: {}", field, m));
        let v = match self.object().get(field) {
            None => return Ok(None),
            Some(v) if v.is_null() => return Ok(None),
            Some(v) => v,
        };
        let ns: i128 = match v.kind() {
            json::Kind::String => {
                let s = v.as_str().map_err(|e| bad(e.to_string()))?;
                duration::parse_go_duration(&s).map_err(bad)? as i128
            }
            json::Kind::Number => match v.as_i64() {
                Ok(ms) => ms as i128 * 1_000_000,
                Err(_) => (v.as_f64().map_err(|e| bad(e.to_string()))? * 1e6) as i128,
            },
            _ => {
                return Err(bad(format!(
                    "want a duration string (\"10s\") or a number of milliseconds, got {}",
                    String::from_utf8_lossy(v.raw())
                )))
            }
        };
        if ns < 0 {
            return Err(bad(format!("negative duration {}", String::from_utf8_lossy(v.raw()))));
        }
        if ns > i64::MAX as i128 {
            return Err(bad(format!("duration {} is too large", String::from_utf8_lossy(v.raw()))));
        }
        Ok(Some(Duration::from_nanos(ns as u64)))
    }
}

// ---------------------------------------------------------------------------------------------
// Key, rows, emitter

/// The group's key: one JSON string or number in canonical form (ABI section 5.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Key<'a> {
    raw: &'a [u8],
}

impl<'a> Key<'a> {
    /// A key from its canonical JSON, for native tests.
    pub fn new(json: &'a [u8]) -> Key<'a> {
        Key { raw: json }
    }

    /// The key as JSON, with its type: `"alice"` (quotes included) or `42`. Emit it as it is to
    /// keep the key's type: `writer.raw("user_id", key.json())`.
    pub fn json(&self) -> &'a [u8] {
        self.raw
    }

    /// Whether the key is a JSON string (otherwise it is a number).
    pub fn is_string(&self) -> bool {
        self.raw.first() == Some(&b'"')
    }

    /// The key decoded: the string without quotes and escapes, or the number's text.
    pub fn as_str(&self) -> Cow<'a, str> {
        if self.is_string() {
            if let Ok(v) = json::Value::parse(self.raw) {
                if let Ok(s) = v.as_str() {
                    return s;
                }
            }
        }
        String::from_utf8_lossy(self.raw)
    }
}

impl fmt::Display for Key<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.as_str())
    }
}

/// The group's rows, in arrival order: each one input message (a JSON object), as bytes
/// borrowed from the input buffer (valid during the call only). None on a timeout call.
#[derive(Clone, Debug)]
pub struct Rows<'a> {
    buf: &'a [u8], // row_count byte strings, validated
    left: usize,
}

impl<'a> Rows<'a> {
    /// Rows for native tests.
    pub fn encode(rows: &[&[u8]]) -> Vec<u8> {
        let mut b = Vec::new();
        for r in rows {
            b.extend_from_slice(&(r.len() as u32).to_le_bytes());
            b.extend_from_slice(r);
        }
        b
    }

    /// Iterates `n` rows encoded by [`Rows::encode`] (or read from a process buffer).
    pub fn new(encoded: &'a [u8], n: usize) -> Rows<'a> {
        Rows { buf: encoded, left: n }
    }
}

impl<'a> Iterator for Rows<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        if self.left == 0 || self.buf.len() < 4 {
            return None;
        }
        let n = u32::from_le_bytes([self.buf[0], self.buf[1], self.buf[2], self.buf[3]]) as usize;
        let end = (4 + n).min(self.buf.len());
        let row = &self.buf[4..end];
        self.buf = &self.buf[end..];
        self.left -= 1;
        Some(row)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl ExactSizeIterator for Rows<'_> {}

/// Where a handler's output rows go: each [`Emitter::emit`] is one message on the output
/// subject, in order. The bytes are copied into the result at once, so a reused buffer or a
/// slice of a row is fine.
pub struct Emitter<'a> {
    out: &'a mut Vec<u8>,
    count: u32,
}

impl<'a> Emitter<'a> {
    /// An emitter appending to `out` (byte strings), for native tests.
    pub fn new(out: &'a mut Vec<u8>) -> Emitter<'a> {
        Emitter { out, count: 0 }
    }

    /// Emits one row (it SHOULD be a JSON document).
    pub fn emit(&mut self, row: impl AsRef<[u8]>) {
        let row = row.as_ref();
        self.out.extend_from_slice(&(row.len() as u32).to_le_bytes());
        self.out.extend_from_slice(row);
        self.count += 1;
    }

    /// The number of rows emitted so far in this call.
    pub fn count(&self) -> u32 {
        self.count
    }
}

// ---------------------------------------------------------------------------------------------
// State handle

/// A state value for [`GroupState::update`]: bytes, a string, an [`json::ObjectWriter`], or an
/// `Option` of those (`None` is the null value, an error).
pub trait StateValue {
    /// The bytes, or `None` for null.
    fn state_bytes(&self) -> Option<&[u8]>;
}

impl StateValue for [u8] {
    fn state_bytes(&self) -> Option<&[u8]> {
        Some(self)
    }
}
impl<const N: usize> StateValue for [u8; N] {
    fn state_bytes(&self) -> Option<&[u8]> {
        Some(self)
    }
}
impl StateValue for Vec<u8> {
    fn state_bytes(&self) -> Option<&[u8]> {
        Some(self)
    }
}
impl StateValue for str {
    fn state_bytes(&self) -> Option<&[u8]> {
        Some(self.as_bytes())
    }
}
impl StateValue for String {
    fn state_bytes(&self) -> Option<&[u8]> {
        Some(self.as_bytes())
    }
}
impl StateValue for json::ObjectWriter {
    fn state_bytes(&self) -> Option<&[u8]> {
        Some(self.as_bytes())
    }
}
impl<T: StateValue + ?Sized> StateValue for &T {
    fn state_bytes(&self) -> Option<&[u8]> {
        (**self).state_bytes()
    }
}
impl<T: StateValue + ?Sized> StateValue for &mut T {
    fn state_bytes(&self) -> Option<&[u8]> {
        (**self).state_bytes()
    }
}
impl<T: StateValue> StateValue for Option<T> {
    fn state_bytes(&self) -> Option<&[u8]> {
        self.as_ref().and_then(|v| v.state_bytes())
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Action {
    Keep = 0,
    Update = 1,
    Remove = 2,
}

/// The state handle of one group, like Spark's `GroupState`: the key's value (opaque bytes,
/// JSON by convention), its timeout, and the batch's times. Every call starts with the value
/// the key came with, action "keep" and **no timeout**.
pub struct GroupState<'a> {
    initial: Option<&'a [u8]>,
    value: &'a mut Vec<u8>, // the value after update
    exists: bool,
    action: Action,
    timeout_ms: i64, // 0: none
    timed_out: bool,
    processing_time_ms: i64,
    watermark_ms: i64,
    mode: TimeoutMode,
    has_watermark: bool,
}

impl<'a> GroupState<'a> {
    /// A handle for native tests: `initial` is the key's value, `scratch` holds updates.
    pub fn new(
        config: &Config,
        initial: Option<&'a [u8]>,
        timed_out: bool,
        processing_time_ms: i64,
        watermark_ms: i64,
        scratch: &'a mut Vec<u8>,
    ) -> GroupState<'a> {
        scratch.clear();
        GroupState {
            initial,
            value: scratch,
            exists: initial.is_some(),
            action: Action::Keep,
            timeout_ms: 0,
            timed_out,
            processing_time_ms,
            watermark_ms,
            mode: config.mode,
            has_watermark: config.has_watermark,
        }
    }

    /// Whether the key has a value: the one it came with or one set by `update`, and not
    /// removed since.
    pub fn exists(&self) -> bool {
        self.exists
    }

    /// The value; an error ([`ErrorKind::NoState`]) when there is none.
    pub fn get(&self) -> Result<&[u8], Error> {
        self.get_option().ok_or_else(|| {
            Error::gs(ErrorKind::NoState, "state is either not defined or has already been removed")
        })
    }

    /// The value, or `None`.
    pub fn get_option(&self) -> Option<&[u8]> {
        if !self.exists {
            None
        } else if self.action == Action::Update {
            Some(&self.value[..])
        } else {
            self.initial
        }
    }

    /// Sets the value (copied). `None` is an error ([`ErrorKind::NullState`]); an empty value is
    /// a value. An `update` after `remove` revives the key.
    pub fn update(&mut self, v: impl StateValue) -> Result<(), Error> {
        let b = v
            .state_bytes()
            .ok_or_else(|| Error::gs(ErrorKind::NullState, "null is not a valid state value"))?;
        self.value.clear();
        self.value.extend_from_slice(b);
        self.exists = true;
        self.action = Action::Update;
        Ok(())
    }

    /// Deletes the value (repeatable). Does not clear a timeout set in this call.
    pub fn remove(&mut self) {
        self.exists = false;
        self.action = Action::Remove;
    }

    /// Whether this is a timeout call (no rows).
    pub fn has_timed_out(&self) -> bool {
        self.timed_out
    }

    /// Times the key out at the batch's processing time plus `d` (truncated to whole
    /// milliseconds). Only with `timeout: processing_time`, and `d` must be at least 1 ms.
    pub fn set_timeout_duration(&mut self, d: Duration) -> Result<(), Error> {
        let ms = d.as_millis();
        self.set_timeout_duration_ms(if ms > i64::MAX as u128 { i64::MAX } else { ms as i64 })
    }

    /// [`GroupState::set_timeout_duration`] in milliseconds.
    pub fn set_timeout_duration_ms(&mut self, ms: i64) -> Result<(), Error> {
        if self.mode != TimeoutMode::ProcessingTime {
            return Err(Error::gs(
                ErrorKind::DurationNotAllowed,
                "cannot set timeout duration without processing_time timeout",
            ));
        }
        if ms <= 0 {
            return Err(Error::gs(ErrorKind::NonPositiveDuration, "timeout duration must be positive"));
        }
        let ts = self.processing_time_ms.checked_add(ms).ok_or_else(|| {
            Error::gs(
                ErrorKind::DurationOverflow,
                &format!(
                    "timeout duration {} ms overflows the processing time {} ms",
                    ms, self.processing_time_ms
                ),
            )
        })?;
        self.timeout_ms = ts;
        Ok(())
    }

    /// Times the key out when the watermark passes `ts` (epoch ms). Only with
    /// `timeout: event_time`; `ts` must be positive and not earlier than the watermark.
    pub fn set_timeout_timestamp(&mut self, ts: i64) -> Result<(), Error> {
        if self.mode != TimeoutMode::EventTime {
            return Err(Error::gs(
                ErrorKind::TimestampNotAllowed,
                "cannot set timeout timestamp without event_time timeout",
            ));
        }
        if ts <= 0 {
            return Err(Error::gs(ErrorKind::NonPositiveTimestamp, "timeout timestamp must be positive"));
        }
        if ts < self.watermark_ms {
            return Err(Error::gs(
                ErrorKind::TimestampBeforeWatermark,
                &format!(
                    "timeout timestamp ({}) cannot be earlier than the current watermark ({})",
                    ts, self.watermark_ms
                ),
            ));
        }
        self.timeout_ms = ts;
        Ok(())
    }

    /// The batch's event-time watermark (0 in the first batch); an error
    /// ([`ErrorKind::NoWatermark`]) when the spec has no `event_time`.
    pub fn current_watermark_ms(&self) -> Result<i64, Error> {
        if !self.has_watermark {
            return Err(Error::gs(ErrorKind::NoWatermark, "no watermark is defined"));
        }
        Ok(self.watermark_ms)
    }

    /// The batch's processing time (the same for every group of the batch). Use it instead of
    /// a clock.
    pub fn current_processing_time_ms(&self) -> i64 {
        self.processing_time_ms
    }

    /// The timeout this call set (0: none), for native tests.
    pub fn timeout_ms(&self) -> i64 {
        self.timeout_ms
    }

    pub(crate) fn action(&self) -> Action {
        self.action
    }
}

// ---------------------------------------------------------------------------------------------
// Handler

/// A handler: `init` runs once per module instance with the config, `handle` once per group
/// (key) of a batch. Return an error to fail the group (its output, state change and timeout
/// are discarded; the deployment's `on_error` decides what happens next).
///
/// Instances come and go (several run in parallel; one is replaced after any trap): keep per-key
/// memory in the state value, never in `self`. `self` is for config and scratch buffers.
pub trait Handler: 'static {
    /// Reads the config; an error refuses the deployment with its message.
    fn init(config: &Config) -> Result<Self, Error>
    where
        Self: Sized;

    /// Handles one group. `rows` is empty on a timeout call (`state.has_timed_out()`).
    fn handle(
        &mut self,
        key: &Key<'_>,
        rows: Rows<'_>,
        state: &mut GroupState<'_>,
        out: &mut Emitter<'_>,
    ) -> Result<(), Error>;
}

/// Exports the module's ABI functions (`gs_abi_version`, `gs_alloc`, `gs_init`, `gs_process`)
/// for a [`Handler`] type. Use it once, in the crate built as the `cdylib`:
/// `groupstate::export!(MyHandler);`
#[macro_export]
macro_rules! export {
    ($handler:ty) => {
        const _: () = {
            #[no_mangle]
            pub extern "C" fn gs_abi_version() -> i32 {
                $crate::ABI_VERSION as i32
            }
            #[no_mangle]
            pub extern "C" fn gs_alloc(size: i32) -> i32 {
                $crate::__private::alloc(size)
            }
            #[no_mangle]
            pub extern "C" fn gs_init(ptr: i32, len: i32) -> i64 {
                $crate::__private::init::<$handler>(ptr, len)
            }
            #[no_mangle]
            pub extern "C" fn gs_process(ptr: i32, len: i32) -> i64 {
                $crate::__private::process(ptr, len)
            }
        };
    };
}

#[doc(hidden)]
pub mod __private {
    pub use crate::rt::{alloc, init, process};
}

// ---------------------------------------------------------------------------------------------
// Logging

/// Log levels of [`log`] (log/slog's).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    Debug = -4,
    Info = 0,
    Warn = 4,
    Error = 8,
}

/// Writes `msg` to the runtime's log at `level`, tagged with the deployment and the current
/// key. Messages over 16 KiB are truncated by the host. Natively, it prints to stderr.
pub fn log(level: Level, msg: &str) {
    rt::host_log(level as i32, msg.as_bytes());
}

// ---------------------------------------------------------------------------------------------
// ABI v2 (transformWithState processors), behind the feature "v2".
//
// A `transformWithState` processor ([`StatefulProcessor`], [`export_processor!`]) builds an ABI
// v2 module (abi/README.md section 9, a draft the runtime does not accept yet): enable the
// feature `v2` (cargo: `features = ["v2"]`; rustc: `--cfg 'feature="v2"'`). Without it the SDK
// compiles no v2 code, so v1 modules are exactly what they were; with it, a v1 module
// (`export!`) still references no v2 code and does not import `groupstate.state`. These
// declarations stay at the end of the file: the v1 code's panic locations (line numbers) are
// part of the v1 modules' bytes.

#[cfg(feature = "v2")]
mod processor;
#[cfg(feature = "v2")]
mod v2;
#[cfg(feature = "v2")]
mod wire;

#[cfg(feature = "v2")]
pub use processor::{
    apply_initial_state, InputRows, ListIter, ListState, MapIter, MapKeys, MapState, MapValues, ProcessorHandle,
    RawJson, StateCodec, StatefulProcessor, Timers, ValueState, WithInputs,
};
#[cfg(feature = "v2")]
pub use v2::{
    ProcessorModule, StateHost, VarKind, ABI_VERSION_V2, MAX_INPUTS, MAX_INPUT_NAME_LEN, MAX_VARS, MAX_VAR_NAME_LEN, STATE_REFUSED,
};

#[doc(hidden)]
#[cfg(feature = "v2")]
pub mod __private_v2 {
    pub use crate::v2::{init, process};
    pub use crate::wire::alloc;
}

#[cfg(all(test, feature = "v2"))]
mod tests_v2;
