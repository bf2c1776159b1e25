//! transformWithState processors (ABI v2, abi/README.md section 9): the [`StatefulProcessor`]
//! trait, its state variables ([`ValueState`], [`ListState`], [`MapState`]), its [`Timers`],
//! and the JSON codec of state values ([`StateCodec`]).

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fmt;
use std::marker::PhantomData;
use std::rc::Rc;
use std::time::Duration;

use crate::json::{self, Kind, Value};
use crate::wire::{put_bytes, put_u32, put_u64, Reader};
use crate::v2::*;
use crate::{Config, Emitter, Error, ErrorKind, Key, TimeoutMode};

// ---------------------------------------------------------------------------------------------
// The processor

/// A transformWithState handler (ABI v2), after Spark 4's `StatefulProcessor` and Flink's
/// `KeyedProcessFunction`: each key holds the named state variables the processor declares in
/// [`StatefulProcessor::init`] (values, lists and maps, with an optional TTL) and any number of
/// timers. Export it with [`crate::export_processor!`].
///
/// The processor keeps the handles `init` returns in its fields; they operate on the key of the
/// call in progress. Like every handler, a processor must be deterministic and keep nothing
/// that matters outside its state (abi/README.md section 6): instances come and go.
///
/// Reads return a `Result`: when the host refuses a state request (or answers it malformed),
/// the read returns the error and the call fails with it, whatever the processor returns; every
/// later state operation of the call returns the same error. Propagate it with `?`.
pub trait StatefulProcessor: 'static {
    /// Runs once per module instance: reads the config (`handle.config()`) and declares the
    /// state variables (`handle.value_state::<T>("name")`, ...). An error (or an invalid
    /// declaration) fails the instance's init: the host refuses to start the deployment.
    fn init(handle: &mut ProcessorHandle<'_>) -> Result<Self, Error>
    where
        Self: Sized;

    /// Called once per key and micro-batch with that key's rows, in arrival order (at least
    /// one). With several inputs (the spec's `inputs:`), [`InputRows::with_inputs`] tells
    /// each row's input.
    fn handle_input_rows(
        &mut self,
        key: &Key<'_>,
        rows: InputRows<'_>,
        timers: &mut Timers,
        out: &mut Emitter<'_>,
    ) -> Result<(), Error>;

    /// Called for each expired timer of a key, in timestamp order, after every data call of the
    /// batch; `timer_ms` is the timer's timestamp. A timer fires once: it is deleted when it
    /// fires, and one that an earlier call deleted does not fire. The default does nothing.
    fn handle_expired_timer(
        &mut self,
        _key: &Key<'_>,
        _timer_ms: i64,
        _timers: &mut Timers,
        _out: &mut Emitter<'_>,
    ) -> Result<(), Error> {
        Ok(())
    }

    /// Called once per key of the deployment's initial state (`groupstate deploy
    /// --initial-state`), in its first batch before the data calls, with the key's line: a JSON
    /// object of variable names. The default is [`apply_initial_state`].
    fn handle_initial_state(
        &mut self,
        _key: &Key<'_>,
        initial: &[u8],
        timers: &mut Timers,
        _out: &mut Emitter<'_>,
    ) -> Result<(), Error> {
        apply_initial_state(timers, initial)
    }
}

// ---------------------------------------------------------------------------------------------
// Rows

/// The rows of a data call ([`StatefulProcessor::handle_input_rows`]), in arrival order: like
/// [`crate::Rows`], an iterator of the rows' bytes, each one input message (a JSON object)
/// borrowed from the input buffer (valid during the call only).
///
/// A deployment with several named inputs (the spec's `inputs:`) tells each row's input:
/// iterate [`InputRows::with_inputs`] for `(input, row)` pairs, the input being one of the
/// names of [`ProcessorHandle::inputs`]. Without `inputs:` every row's input is `""`.
///
/// ```ignore
/// for (input, row) in rows.with_inputs() {
///     match input {
///         "clicks" => ...,
///         "impressions" => ...,
///         _ => return Err(Error::msg(format!("unexpected input {:?}", input))),
///     }
/// }
/// ```
#[derive(Clone, Debug)]
pub struct InputRows<'a> {
    buf: &'a [u8], // the rows: [input index u32 when inputs is not empty] + byte string each
    left: usize,
    inputs: &'a [String],
}

impl<'a> InputRows<'a> {
    /// Iterates `n` rows, for native tests: without inputs (`inputs` empty) `encoded` is as
    /// [`crate::Rows::encode`] writes it; with inputs, as [`InputRows::encode`] writes it.
    pub fn new(encoded: &'a [u8], n: usize, inputs: &'a [String]) -> InputRows<'a> {
        InputRows { buf: encoded, left: n, inputs }
    }

    /// Rows of several inputs for native tests: each row after the index of its input (in the
    /// `inputs` given to [`InputRows::new`]), as the process buffer has them.
    pub fn encode(rows: &[(u32, &[u8])]) -> Vec<u8> {
        let mut b = Vec::new();
        for (input, r) in rows {
            put_u32(&mut b, *input);
            put_bytes(&mut b, r);
        }
        b
    }

    /// The names of the deployment's inputs, in the spec's order (empty without `inputs:`),
    /// as [`ProcessorHandle::inputs`] gives them.
    pub fn inputs(&self) -> &'a [String] {
        self.inputs
    }

    /// The rows with their inputs: `(input, row)`, the input's name being `""` without
    /// `inputs:` in the spec.
    pub fn with_inputs(self) -> WithInputs<'a> {
        WithInputs(self)
    }

    /// The next row and the index of its input (`None` without inputs).
    fn next_row(&mut self) -> Option<(Option<usize>, &'a [u8])> {
        if self.left == 0 {
            return None;
        }
        let mut r = Reader::new(self.buf);
        let input = if self.inputs.is_empty() { None } else { Some(r.u32() as usize) };
        let row = r.bytes();
        if r.failed {
            self.left = 0; // only a hand-made buffer is short: the host's rows were checked
            return None;
        }
        self.buf = &self.buf[r.i..];
        self.left -= 1;
        Some((input, row))
    }
}

impl<'a> Iterator for InputRows<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        self.next_row().map(|(_, row)| row)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl ExactSizeIterator for InputRows<'_> {}

/// The iterator of [`InputRows::with_inputs`]: `(input, row)` pairs in arrival order.
#[derive(Clone, Debug)]
pub struct WithInputs<'a>(InputRows<'a>);

impl<'a> Iterator for WithInputs<'a> {
    type Item = (&'a str, &'a [u8]);

    fn next(&mut self) -> Option<(&'a str, &'a [u8])> {
        let inputs = self.0.inputs;
        self.0.next_row().map(|(i, row)| (i.and_then(|i| inputs.get(i)).map_or("", |s| s.as_str()), row))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.0.size_hint()
    }
}

impl ExactSizeIterator for WithInputs<'_> {}

/// Exports the module's ABI v2 functions (`gs_abi_version` returning 2, `gs_alloc`, `gs_init`,
/// `gs_process`) for a [`StatefulProcessor`] type, instead of [`crate::export!`]. Use it once,
/// in the crate built as the `cdylib`: `groupstate::export_processor!(MyProcessor);`
///
/// The runtime does not accept ABI v2 modules yet (docs/handlers/rust.md).
#[macro_export]
macro_rules! export_processor {
    ($processor:ty) => {
        const _: () = {
            #[no_mangle]
            pub extern "C" fn gs_abi_version() -> i32 {
                $crate::ABI_VERSION_V2 as i32
            }
            #[no_mangle]
            pub extern "C" fn gs_alloc(size: i32) -> i32 {
                $crate::__private_v2::alloc(size)
            }
            #[no_mangle]
            pub extern "C" fn gs_init(ptr: i32, len: i32) -> i64 {
                $crate::__private_v2::init::<$processor>(ptr, len)
            }
            #[no_mangle]
            pub extern "C" fn gs_process(ptr: i32, len: i32) -> i64 {
                $crate::__private_v2::process(ptr, len)
            }
        };
    };
}

// ---------------------------------------------------------------------------------------------
// Declarations

/// What [`StatefulProcessor::init`] receives: the deployment's config and the means to declare
/// state variables. A variable's name is 1-64 characters of `[a-z0-9_]` starting with a letter,
/// unique among the processor's variables; an invalid declaration fails the init with a message
/// that names it.
pub struct ProcessorHandle<'a> {
    pub(crate) e: &'a Shared,
    pub(crate) config: &'a Config,
    pub(crate) inputs: &'a [String],
}

impl<'a> ProcessorHandle<'a> {
    /// The deployment's config (name, timeout mode, config object).
    pub fn config(&self) -> &Config {
        self.config
    }

    /// The names of the deployment's inputs, in the spec's order: empty for a deployment with
    /// one input (no `inputs:` in the spec). A processor that needs given inputs checks them
    /// here and fails the init naming the problem.
    pub fn inputs(&self) -> &[String] {
        self.inputs
    }

    /// Declares a value state variable (Spark's `ValueState`): one `T` per key, or none.
    pub fn value_state<T: StateCodec>(&mut self, name: &str) -> ValueState<T> {
        let var = self.declare::<T>(name, VarKind::Value, None);
        ValueState { var, cache: RefCell::new(ValueCache { gen: 0, present: false, bytes: Vec::new() }), _t: PhantomData }
    }

    /// [`ProcessorHandle::value_state`] with a time to live: the value expires `ttl` after it
    /// was last written (Spark's `TTLConfig`), judged at the batch's processing time.
    pub fn value_state_with_ttl<T: StateCodec>(&mut self, name: &str, ttl: Duration) -> ValueState<T> {
        let var = self.declare::<T>(name, VarKind::Value, Some(ttl));
        ValueState { var, cache: RefCell::new(ValueCache { gen: 0, present: false, bytes: Vec::new() }), _t: PhantomData }
    }

    /// Declares a list state variable (Spark's `ListState`): an ordered list of `T` per key.
    pub fn list_state<T: StateCodec>(&mut self, name: &str) -> ListState<T> {
        ListState { var: self.declare::<T>(name, VarKind::List, None), _t: PhantomData }
    }

    /// [`ProcessorHandle::list_state`] with a time to live: each element expires on its own,
    /// `ttl` after it was written.
    pub fn list_state_with_ttl<T: StateCodec>(&mut self, name: &str, ttl: Duration) -> ListState<T> {
        ListState { var: self.declare::<T>(name, VarKind::List, Some(ttl)), _t: PhantomData }
    }

    /// Declares a map state variable (Spark's `MapState`): `V` values under string keys, per
    /// key of the stream.
    pub fn map_state<V: StateCodec>(&mut self, name: &str) -> MapState<V> {
        MapState { var: self.declare::<V>(name, VarKind::Map, None), _t: PhantomData }
    }

    /// [`ProcessorHandle::map_state`] with a time to live: each entry expires on its own,
    /// `ttl` after it was last written.
    pub fn map_state_with_ttl<V: StateCodec>(&mut self, name: &str, ttl: Duration) -> MapState<V> {
        MapState { var: self.declare::<V>(name, VarKind::Map, Some(ttl)), _t: PhantomData }
    }

    fn declare<T: StateCodec>(&mut self, name: &str, kind: VarKind, ttl: Option<Duration>) -> Var {
        let mut e = self.e.borrow_mut();
        let mut problem = var_name_problem(name).map(|p| format!("name {}", p));
        let mut ttl_ms = 0;
        if let Some(ttl) = ttl {
            let ms = ttl.as_millis();
            if problem.is_none() && ms == 0 {
                problem = Some(format!("ttl {:?} is not at least 1ms", ttl));
            }
            ttl_ms = ms.min(i64::MAX as u128) as i64;
        }
        if problem.is_none() && e.var_index(name).is_some() {
            problem = Some("declared twice".to_string());
        }
        if let Some(p) = problem {
            if e.decl_err.is_none() {
                e.decl_err = Some(Error::new(ErrorKind::Config, format!("groupstate: state variable {:?}: {}", name, p)));
            }
        }
        e.vars.push(VarInfo { name: name.to_string(), kind, ttl_ms, check: check::<T> });
        Var { e: self.e.clone(), idx: (e.vars.len() - 1) as u32, name: Rc::from(name) }
    }
}

fn check<T: StateCodec>(b: &[u8]) -> Result<(), Error> {
    T::decode_json(b).map(|_| ())
}

/// What every state variable handle shares: the engine and the variable's index.
#[derive(Clone)]
struct Var {
    e: Shared,
    idx: u32,
    name: Rc<str>,
}

impl Var {
    /// Encodes `v` as JSON into `buf`; a value that encodes to `null` is
    /// [`ErrorKind::NullState`].
    fn encode<T: StateCodec>(&self, v: &T, buf: &mut Vec<u8>) -> Result<(), Error> {
        let start = buf.len();
        v.encode_json(buf).map_err(|e| {
            Error::new(e.kind(), format!("groupstate: encoding state variable {}: {}", self.name, e.message()))
        })?;
        if &buf[start..] == b"null" {
            buf.truncate(start);
            return Err(Error::new(ErrorKind::NullState, "groupstate: null is not a valid state value"));
        }
        Ok(())
    }

    fn decode<T: StateCodec>(&self, b: &[u8]) -> Result<T, Error> {
        T::decode_json(b).map_err(|e| {
            Error::new(e.kind(), format!("groupstate: decoding state variable {}: {}", self.name, e.message()))
        })
    }

    /// A decoding error of a read fails the call, as a refused request does.
    fn decode_or_fail<T: StateCodec>(&self, b: &[u8]) -> Result<T, Error> {
        self.decode(b).map_err(|err| self.e.borrow_mut().fail(err))
    }

    /// Appends a write op (after the call's checks); nothing once the call failed.
    fn write(&self, what: &str, f: impl FnOnce(&mut Vec<u8>)) -> Result<(), Error> {
        let mut e = self.e.borrow_mut();
        e.begin(what);
        e.check()?;
        f(&mut e.ops);
        Ok(())
    }

    /// Sends a one-flag read (LIST_EXISTS, MAP_EXISTS, MAP_CONTAINS).
    fn read_flag(&self, what: &str, op: u8, key: Option<&[u8]>) -> Result<bool, Error> {
        let mut e = self.e.borrow_mut();
        e.begin(what);
        let mark = e.ops.len();
        op_var(&mut e.ops, op, self.idx);
        if let Some(k) = key {
            put_bytes(&mut e.ops, k);
        }
        e.read(mark, op, |r| read_flag(r, "answer"))
    }
}

// ---------------------------------------------------------------------------------------------
// Values

struct ValueCache {
    gen: u64,
    present: bool,
    bytes: Vec<u8>,
}

/// A value state variable (Spark's `ValueState`): one `T` per key, stored as JSON, or none.
/// Declare it with [`ProcessorHandle::value_state`].
///
/// Reads go to the host (one state call, which also carries the call's earlier writes); the
/// value read or written last is remembered until the end of the call, so `exists` followed by
/// `get` costs one state call.
pub struct ValueState<T> {
    var: Var,
    cache: RefCell<ValueCache>,
    _t: PhantomData<fn() -> T>,
}

impl<T: StateCodec> ValueState<T> {
    /// The stored JSON, from the cache or the host: `f(Some(json))` or `f(None)`.
    fn with_raw<R>(&self, what: &str, f: impl FnOnce(Option<&[u8]>) -> Result<R, Error>) -> Result<R, Error> {
        let mut c = self.cache.borrow_mut();
        {
            let mut e = self.var.e.borrow_mut();
            e.begin(what);
            if c.gen != e.gen {
                let mark = e.ops.len();
                op_var(&mut e.ops, OP_VALUE_GET, self.var.idx);
                let bytes = &mut c.bytes;
                bytes.clear();
                let present = e.read(mark, OP_VALUE_GET, |r| {
                    let p = read_flag(r, "present")?;
                    if p {
                        bytes.extend_from_slice(r.bytes());
                    }
                    Ok(p)
                })?;
                c.present = present;
                c.gen = e.gen;
            } else {
                e.check()?;
            }
        }
        if c.present {
            f(Some(&c.bytes))
        } else {
            f(None)
        }
    }

    /// Whether the key has a (live) value.
    pub fn exists(&self) -> Result<bool, Error> {
        self.with_raw("ValueState::exists", |b| Ok(b.is_some()))
    }

    /// The value; [`ErrorKind::NoState`] when there is none, or the error decoding it (which
    /// does not fail the call: the processor may handle it, e.g. clear the value).
    pub fn get(&self) -> Result<T, Error> {
        self.with_raw("ValueState::get", |b| match b {
            Some(b) => self.var.decode(b),
            None => Err(Error::new(ErrorKind::NoState, "groupstate: state is either not defined or has already been removed")),
        })
    }

    /// The value, or `None` when there is none; or the error decoding it, as for `get`.
    pub fn get_option(&self) -> Result<Option<T>, Error> {
        self.with_raw("ValueState::get_option", |b| match b {
            Some(b) => self.var.decode(b).map(Some),
            None => Ok(None),
        })
    }

    /// The value as stored (JSON), or `None`.
    pub fn get_raw(&self) -> Result<Option<Vec<u8>>, Error> {
        self.with_raw("ValueState::get_raw", |b| Ok(b.map(|b| b.to_vec())))
    }

    /// Sets the value to `v`, encoded as JSON. A value that encodes to `null` is
    /// [`ErrorKind::NullState`]; on error the value is unchanged.
    pub fn update(&self, v: &T) -> Result<(), Error> {
        let mut c = self.cache.borrow_mut();
        let mut e = self.var.e.borrow_mut();
        e.begin("ValueState::update");
        e.check()?;
        let mut b = std::mem::take(&mut c.bytes);
        b.clear();
        let res = self.var.encode(v, &mut b);
        if res.is_ok() {
            op_var(&mut e.ops, OP_VALUE_SET, self.var.idx);
            put_bytes(&mut e.ops, &b);
            c.present = true;
            c.gen = e.gen;
        } else {
            c.gen = 0; // the cache was overwritten: read again
        }
        c.bytes = b;
        res
    }

    /// Removes the value.
    pub fn clear(&self) {
        let mut c = self.cache.borrow_mut();
        let mut e = self.var.e.borrow_mut();
        e.begin("ValueState::clear");
        if e.check().is_ok() {
            op_var(&mut e.ops, OP_VALUE_CLEAR, self.var.idx);
            c.bytes.clear();
            c.present = false;
            c.gen = e.gen;
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Lists

/// A list state variable (Spark's `ListState`): an ordered list of `T` per key, each element
/// stored as JSON. Declare it with [`ProcessorHandle::list_state`].
///
/// Writes cost the same whatever the list's length: `append` sends one element to the host,
/// never the list. [`ListState::iter`] reads the list lazily, a page at a time.
pub struct ListState<T> {
    var: Var,
    _t: PhantomData<fn() -> T>,
}

impl<T: StateCodec> ListState<T> {
    /// Whether the list has a (live) element.
    pub fn exists(&self) -> Result<bool, Error> {
        self.var.read_flag("ListState::exists", OP_LIST_EXISTS, None)
    }

    /// Iterates over the elements in order, reading them from the host a page at a time as the
    /// iteration advances: stopping after the first element of a long list fetches one page.
    /// An error (a refused read, an element that does not decode) is yielded once, fails the
    /// call and ends the iteration. Writes made during the iteration are sent with the next
    /// page's read; avoid changing the list while iterating over it.
    pub fn iter(&self) -> ListIter<T> {
        self.var.e.borrow().begin("ListState::iter");
        ListIter { var: self.var.clone(), page: Vec::new(), pos: 0, left: 0, next: 0, started: false, done: false, _t: PhantomData }
    }

    /// Reads the whole list (see [`ListState::iter`]).
    pub fn get(&self) -> Result<Vec<T>, Error> {
        self.iter().collect()
    }

    /// Replaces the list with `vs` (an empty `vs` clears it). An element that encodes to
    /// `null` is [`ErrorKind::NullState`]; on error the list is unchanged.
    pub fn put(&self, vs: &[T]) -> Result<(), Error> {
        self.elements("ListState::put", OP_LIST_PUT, vs)
    }

    /// Appends `v`.
    pub fn append(&self, v: &T) -> Result<(), Error> {
        self.elements("ListState::append", OP_LIST_APPEND, std::slice::from_ref(v))
    }

    /// Appends `vs` in order (nothing when empty).
    pub fn append_all(&self, vs: &[T]) -> Result<(), Error> {
        if vs.is_empty() {
            let e = self.var.e.borrow();
            e.begin("ListState::append_all");
            return e.check();
        }
        self.elements("ListState::append_all", OP_LIST_APPEND, vs)
    }

    /// Removes every element.
    pub fn clear(&self) {
        let _ = self.var.write("ListState::clear", |ops| op_var(ops, OP_LIST_CLEAR, self.var.idx));
    }

    fn elements(&self, what: &str, op: u8, vs: &[T]) -> Result<(), Error> {
        let mut e = self.var.e.borrow_mut();
        e.begin(what);
        e.check()?;
        let mark = e.ops.len();
        op_var(&mut e.ops, op, self.var.idx);
        put_u32(&mut e.ops, vs.len() as u32);
        for (i, v) in vs.iter().enumerate() {
            let at = e.ops.len();
            put_u32(&mut e.ops, 0);
            if let Err(err) = self.var.encode(v, &mut e.ops) {
                e.ops.truncate(mark);
                return Err(if vs.len() > 1 || op == OP_LIST_PUT {
                    Error::new(err.kind(), format!("element {}: {}", i, err.message()))
                } else {
                    err
                });
            }
            let n = (e.ops.len() - at - 4) as u32;
            e.ops[at..at + 4].copy_from_slice(&n.to_le_bytes());
        }
        Ok(())
    }
}

/// The lazy iterator of [`ListState::iter`]: `Result<T, Error>` per element.
pub struct ListIter<T> {
    var: Var,
    page: Vec<u8>, // the last LIST_READ answer
    pos: usize,    // the next element in page
    left: u32,     // elements of page not yielded yet
    next: u64,     // the answer's next cursor
    started: bool,
    done: bool,
    _t: PhantomData<fn() -> T>,
}

impl<T> ListIter<T> {
    /// Fetches the page at `cursor`.
    fn fetch(&mut self, cursor: u64) -> Result<(), Error> {
        let mut e = self.var.e.borrow_mut();
        e.begin("ListState::iter");
        let mark = e.ops.len();
        op_var(&mut e.ops, OP_LIST_READ, self.var.idx);
        put_u64(&mut e.ops, cursor);
        let pb = e.page_bytes;
        put_u32(&mut e.ops, pb);
        let (count, pos, next) = e.read(mark, OP_LIST_READ, |r| {
            let count = r.u32();
            if !r.failed && count as usize > (r.b.len() - r.i) / 4 {
                return Err(format!("{} elements cannot fit in the answers", count));
            }
            let pos = r.i;
            for _ in 0..count {
                r.bytes();
            }
            let next = read_u64(r);
            if !r.failed && count == 0 && next != 0 {
                return Err("no elements but next is not 0".to_string());
            }
            Ok((count, pos, next))
        })?;
        self.page.clear();
        self.page.extend_from_slice(e.last_answers());
        self.pos = pos;
        self.left = count;
        self.next = next;
        Ok(())
    }
}

impl<T: StateCodec> Iterator for ListIter<T> {
    type Item = Result<T, Error>;

    fn next(&mut self) -> Option<Result<T, Error>> {
        if self.done {
            return None;
        }
        while self.left == 0 {
            if self.started && self.next == 0 {
                self.done = true;
                return None;
            }
            let cursor = if self.started { self.next } else { 0 };
            self.started = true;
            if let Err(e) = self.fetch(cursor) {
                self.done = true;
                return Some(Err(e));
            }
        }
        let mut r = Reader::at(&self.page, self.pos);
        let b = r.bytes();
        self.pos = r.i;
        self.left -= 1;
        let res = self.var.decode_or_fail(b);
        if res.is_err() {
            self.done = true;
        }
        Some(res)
    }
}

// ---------------------------------------------------------------------------------------------
// Maps

/// A map state variable (Spark's `MapState`): `V` values under `String` keys, per key of the
/// stream, each value stored as JSON and each map key as its UTF-8 bytes. Declare it with
/// [`ProcessorHandle::map_state`].
///
/// Writes cost the same whatever the map's size: `update` sends one entry to the host, never
/// the map. [`MapState::iter`], [`MapState::keys`] and [`MapState::values`] read the map
/// lazily, a page at a time, in bytewise order of the map keys.
pub struct MapState<V> {
    var: Var,
    _t: PhantomData<fn() -> V>,
}

impl<V: StateCodec> MapState<V> {
    /// Whether the map has a (live) entry.
    pub fn exists(&self) -> Result<bool, Error> {
        self.var.read_flag("MapState::exists", OP_MAP_EXISTS, None)
    }

    /// The value under `k`, or `None`; or the error decoding it (which does not fail the
    /// call).
    pub fn get(&self, k: &str) -> Result<Option<V>, Error> {
        let mut e = self.var.e.borrow_mut();
        e.begin("MapState::get");
        let mark = e.ops.len();
        op_var(&mut e.ops, OP_MAP_GET, self.var.idx);
        put_bytes(&mut e.ops, k.as_bytes());
        let present = e.read(mark, OP_MAP_GET, |r| {
            let p = read_flag(r, "present")?;
            if p {
                r.bytes();
            }
            Ok(p)
        })?;
        if !present {
            return Ok(None);
        }
        self.var.decode(&e.last_answers()[5..]).map(Some)
    }

    /// Whether the map has a (live) entry under `k`.
    pub fn contains(&self, k: &str) -> Result<bool, Error> {
        self.var.read_flag("MapState::contains", OP_MAP_CONTAINS, Some(k.as_bytes()))
    }

    /// Sets the value under `k` to `v`, encoded as JSON. A value that encodes to `null` is
    /// [`ErrorKind::NullState`]; on error the map is unchanged.
    pub fn update(&self, k: &str, v: &V) -> Result<(), Error> {
        let mut e = self.var.e.borrow_mut();
        e.begin("MapState::update");
        e.check()?;
        let mark = e.ops.len();
        op_var(&mut e.ops, OP_MAP_SET, self.var.idx);
        put_bytes(&mut e.ops, k.as_bytes());
        let at = e.ops.len();
        put_u32(&mut e.ops, 0);
        if let Err(err) = self.var.encode(v, &mut e.ops) {
            e.ops.truncate(mark);
            return Err(err);
        }
        let n = (e.ops.len() - at - 4) as u32;
        e.ops[at..at + 4].copy_from_slice(&n.to_le_bytes());
        Ok(())
    }

    /// Removes the entry under `k`, if any.
    pub fn remove(&self, k: &str) {
        let _ = self.var.write("MapState::remove", |ops| {
            op_var(ops, OP_MAP_REMOVE, self.var.idx);
            put_bytes(ops, k.as_bytes());
        });
    }

    /// Removes every entry.
    pub fn clear(&self) {
        let _ = self.var.write("MapState::clear", |ops| op_var(ops, OP_MAP_CLEAR, self.var.idx));
    }

    /// Iterates over the entries in bytewise order of their keys, reading them from the host a
    /// page at a time as the iteration advances. An error is yielded once, fails the call and
    /// ends the iteration. Avoid changing the map while iterating over it.
    pub fn iter(&self) -> MapIter<V> {
        self.var.e.borrow().begin("MapState::iter");
        MapIter { raw: RawMapIter::new(self.var.clone()), _t: PhantomData }
    }

    /// Iterates over the keys in bytewise order, like [`MapState::iter`] without decoding the
    /// values.
    pub fn keys(&self) -> MapKeys {
        self.var.e.borrow().begin("MapState::keys");
        MapKeys { raw: RawMapIter::new(self.var.clone()) }
    }

    /// Iterates over the values in the bytewise order of their keys.
    pub fn values(&self) -> MapValues<V> {
        self.var.e.borrow().begin("MapState::values");
        MapValues { raw: RawMapIter::new(self.var.clone()), _t: PhantomData }
    }
}

/// Pages through a map with MAP_READ.
struct RawMapIter {
    var: Var,
    page: Vec<u8>,
    pos: usize,
    left: u32,
    more: bool,
    next: Vec<u8>,
    started: bool,
    done: bool,
}

impl RawMapIter {
    fn new(var: Var) -> RawMapIter {
        RawMapIter { var, page: Vec::new(), pos: 0, left: 0, more: false, next: Vec::new(), started: false, done: false }
    }

    fn fetch(&mut self) -> Result<(), Error> {
        let mut e = self.var.e.borrow_mut();
        e.begin("MapState::iter");
        let mark = e.ops.len();
        op_var(&mut e.ops, OP_MAP_READ, self.var.idx);
        put_bytes(&mut e.ops, &self.next);
        let pb = e.page_bytes;
        put_u32(&mut e.ops, pb);
        let (count, pos, more, next_at) = e.read(mark, OP_MAP_READ, |r| {
            let count = r.u32();
            if !r.failed && count as usize > (r.b.len() - r.i) / 8 {
                return Err(format!("{} entries cannot fit in the answers", count));
            }
            let pos = r.i;
            let mut prev: &[u8] = &[];
            for i in 0..count {
                let k = r.bytes();
                r.bytes();
                if r.failed {
                    break;
                }
                if i > 0 && prev >= k {
                    return Err(format!("keys not in strictly ascending order at entry {}", i));
                }
                prev = k;
            }
            let more = read_flag(r, "more")?;
            let next_at = r.i;
            let next = r.bytes();
            if !r.failed && count == 0 && more {
                return Err("no entries but more is 1".to_string());
            }
            if !r.failed && !more && !next.is_empty() {
                return Err("more is 0 but next is not empty".to_string());
            }
            Ok((count, pos, more, next_at))
        })?;
        self.page.clear();
        self.page.extend_from_slice(e.last_answers());
        self.pos = pos;
        self.left = count;
        self.more = more;
        let mut r = Reader::at(&self.page, next_at);
        let next = r.bytes();
        self.next.clear();
        self.next.extend_from_slice(next);
        Ok(())
    }

    /// The next entry as ranges of `page`.
    fn next_entry(&mut self) -> Option<Result<(usize, usize, usize, usize), Error>> {
        if self.done {
            return None;
        }
        while self.left == 0 {
            if self.started && !self.more {
                self.done = true;
                return None;
            }
            self.started = true;
            if let Err(e) = self.fetch() {
                self.done = true;
                return Some(Err(e));
            }
        }
        let mut r = Reader::at(&self.page, self.pos);
        let ks = r.i + 4;
        let k = r.bytes().len();
        let vs = r.i + 4;
        let v = r.bytes().len();
        self.pos = r.i;
        self.left -= 1;
        Some(Ok((ks, ks + k, vs, vs + v)))
    }

    fn fail(&mut self, err: Error) -> Error {
        self.done = true;
        self.var.e.borrow_mut().fail(err)
    }

    fn key(&mut self, s: usize, e: usize) -> Result<String, Error> {
        match std::str::from_utf8(&self.page[s..e]) {
            Ok(k) => Ok(k.to_string()),
            Err(_) => {
                let err = Error::new(
                    ErrorKind::Json,
                    format!("groupstate: state variable {}: map key {:?} is not UTF-8", self.var.name, String::from_utf8_lossy(&self.page[s..e])),
                );
                Err(self.fail(err))
            }
        }
    }

    fn value<V: StateCodec>(&mut self, s: usize, e: usize) -> Result<V, Error> {
        let res = self.var.decode(&self.page[s..e]);
        res.map_err(|err| self.fail(err))
    }
}

/// The lazy iterator of [`MapState::iter`]: `Result<(String, V), Error>` per entry.
pub struct MapIter<V> {
    raw: RawMapIter,
    _t: PhantomData<fn() -> V>,
}

impl<V: StateCodec> Iterator for MapIter<V> {
    type Item = Result<(String, V), Error>;
    fn next(&mut self) -> Option<Self::Item> {
        Some(match self.raw.next_entry()? {
            Err(e) => Err(e),
            Ok((ks, ke, vs, ve)) => self.raw.key(ks, ke).and_then(|k| self.raw.value(vs, ve).map(|v| (k, v))),
        })
    }
}

/// The lazy iterator of [`MapState::keys`].
pub struct MapKeys {
    raw: RawMapIter,
}

impl Iterator for MapKeys {
    type Item = Result<String, Error>;
    fn next(&mut self) -> Option<Self::Item> {
        Some(match self.raw.next_entry()? {
            Err(e) => Err(e),
            Ok((ks, ke, _, _)) => self.raw.key(ks, ke),
        })
    }
}

/// The lazy iterator of [`MapState::values`].
pub struct MapValues<V> {
    raw: RawMapIter,
    _t: PhantomData<fn() -> V>,
}

impl<V: StateCodec> Iterator for MapValues<V> {
    type Item = Result<V, Error>;
    fn next(&mut self) -> Option<Self::Item> {
        Some(match self.raw.next_entry()? {
            Err(e) => Err(e),
            Ok((_, _, vs, ve)) => self.raw.value(vs, ve),
        })
    }
}

// ---------------------------------------------------------------------------------------------
// Timers

/// The timers of the call's key (Spark's `TimerValues` and the timer methods of its
/// `StatefulProcessorHandle`) and the batch's times. A key may hold any number of timers;
/// registering the same timestamp twice is one timer. Valid during the call that received it.
pub struct Timers {
    pub(crate) e: Shared,
}

impl Timers {
    fn timer_op(&mut self, what: &str, op: u8, ts: i64) -> Result<(), Error> {
        let mut e = self.e.borrow_mut();
        e.begin(what);
        if e.mode == TimeoutMode::None {
            return Err(Error::new(
                ErrorKind::Config,
                "groupstate: timers need timeout processing_time or event_time in the deployment spec",
            ));
        }
        e.check()?;
        e.ops.push(op);
        put_i64(&mut e.ops, ts);
        if op == OP_TIMER_DELETE {
            e.mark_deleted(ts);
        }
        Ok(())
    }

    /// Registers a timer at `ts` (epoch ms). It fires, with a call of
    /// [`StatefulProcessor::handle_expired_timer`], in the first batch whose processing time
    /// (`timeout: processing_time`) or watermark (`timeout: event_time`) is strictly after `ts`.
    /// [`ErrorKind::Config`] under `timeout: none`.
    pub fn register(&mut self, ts: i64) -> Result<(), Error> {
        self.timer_op("Timers::register", OP_TIMER_REGISTER, ts)
    }

    /// Deletes the timer at `ts`, if any. In a timer call, deleting a later expired timer of the
    /// key keeps it from firing in this batch, even if a later call registers it again.
    /// [`ErrorKind::Config`] under `timeout: none`.
    pub fn delete(&mut self, ts: i64) -> Result<(), Error> {
        self.timer_op("Timers::delete", OP_TIMER_DELETE, ts)
    }

    /// The key's timers in ascending order (none under `timeout: none`), with the call's
    /// registrations and deletions applied.
    pub fn list(&mut self) -> Result<Vec<i64>, Error> {
        let mut e = self.e.borrow_mut();
        e.begin("Timers::list");
        if e.mode == TimeoutMode::None {
            e.check()?;
            return Ok(Vec::new());
        }
        let mark = e.ops.len();
        e.ops.push(OP_TIMER_LIST);
        e.read(mark, OP_TIMER_LIST, |r| {
            let n = r.u32();
            if !r.failed && (n as u64) * 8 > (r.b.len() - r.i) as u64 {
                return Err(format!("{} timers cannot fit in the answers", n));
            }
            let mut out = Vec::with_capacity(if r.failed { 0 } else { n as usize });
            for i in 0..n {
                let ts = r.i64();
                if i > 0 && !r.failed && ts <= out[out.len() - 1] {
                    return Err(format!("timers not in strictly ascending order at timer {}", i));
                }
                out.push(ts);
            }
            Ok(out)
        })
    }

    /// The batch's processing time in epoch ms: the wall clock at the start of the batch, the
    /// same for every call of the batch. Use it instead of a clock.
    pub fn current_processing_time_ms(&self) -> i64 {
        self.e.borrow().t
    }

    /// The batch's event-time watermark in epoch ms (0 in the first batch);
    /// [`ErrorKind::NoWatermark`] when the deployment configures none.
    pub fn current_watermark_ms(&self) -> Result<i64, Error> {
        let e = self.e.borrow();
        if !e.has_watermark {
            return Err(Error::new(ErrorKind::NoWatermark, "groupstate: no watermark is defined"));
        }
        Ok(e.w)
    }
}

// ---------------------------------------------------------------------------------------------
// Initial state

/// The default of [`StatefulProcessor::handle_initial_state`]: sets each declared variable
/// named in the JSON object `initial` (a value variable to its JSON value, a list to the
/// elements of its JSON array with LIST_PUT, a map to the entries of its JSON object after
/// MAP_CLEAR). Variables not named are left alone, and a JSON `null` is the same as not named.
/// A name that is not declared, a `null` element or map value, or a value that does not decode
/// into the variable's type fails the call (nothing of it is written).
pub fn apply_initial_state(timers: &mut Timers, initial: &[u8]) -> Result<(), Error> {
    let mut e = timers.e.borrow_mut();
    e.begin("apply_initial_state");
    e.check()?;
    let obj = json::Object::parse(initial).map_err(|_| {
        Error::new(
            ErrorKind::Json,
            format!(
                "groupstate: initial state is not a JSON object of state variables: {}",
                String::from_utf8_lossy(initial)
            ),
        )
    })?;
    let mut unknown: Vec<String> = Vec::new();
    for (name, _) in obj.iter() {
        if e.var_index(&name).is_none() && !unknown.iter().any(|u| *u == *name) {
            unknown.push(name.into_owned());
        }
    }
    if !unknown.is_empty() {
        unknown.sort();
        let quoted: Vec<String> = unknown.iter().map(|u| format!("{:?}", u)).collect();
        let names: Vec<&str> = e.vars.iter().map(|v| v.name.as_str()).collect();
        return Err(Error::new(
            ErrorKind::Json,
            format!(
                "groupstate: initial state names undeclared state variables [{}] (declared: {})",
                quoted.join(" "),
                names.join(", ")
            ),
        ));
    }
    let mut ops = Vec::new(); // appended to the call's ops only when every variable is fine
    for (i, v) in e.vars.iter().enumerate() {
        let raw = match obj.get(&v.name) {
            Some(raw) if !raw.is_null() => raw,
            _ => continue,
        };
        let idx = i as u32;
        let name = &v.name;
        let fail = |m: String| Error::new(ErrorKind::Json, m);
        match v.kind {
            VarKind::Value => {
                let b = initial_value(v, raw).map_err(|err| fail(format!("groupstate: initial state of {}: {}", name, err.message())))?;
                op_var(&mut ops, OP_VALUE_SET, idx);
                put_bytes(&mut ops, &b);
            }
            VarKind::List => {
                let elems = raw.as_array().map_err(|_| {
                    fail(format!(
                        "groupstate: initial state of list {}: want a JSON array, got {}",
                        name,
                        String::from_utf8_lossy(raw.raw())
                    ))
                })?;
                let mut enc = Vec::new();
                let mut n = 0u32;
                for (j, el) in elems.enumerate() {
                    let b = initial_value(v, el).map_err(|err| {
                        fail(format!("groupstate: initial state of list {}: element {}: {}", name, j, err.message()))
                    })?;
                    put_bytes(&mut enc, &b);
                    n += 1;
                }
                op_var(&mut ops, OP_LIST_PUT, idx);
                put_u32(&mut ops, n);
                ops.extend_from_slice(&enc);
            }
            VarKind::Map => {
                let entries = raw.as_object().map_err(|_| {
                    fail(format!(
                        "groupstate: initial state of map {}: want a JSON object, got {}",
                        name,
                        String::from_utf8_lossy(raw.raw())
                    ))
                })?;
                let mut sorted: BTreeMap<String, Value<'_>> = BTreeMap::new();
                for (k, val) in entries.iter() {
                    sorted.insert(k.into_owned(), val); // the last of a repeated key wins
                }
                op_var(&mut ops, OP_MAP_CLEAR, idx);
                for (k, val) in &sorted {
                    let b = initial_value(v, *val).map_err(|err| {
                        fail(format!("groupstate: initial state of map {}: key {:?}: {}", name, k, err.message()))
                    })?;
                    op_var(&mut ops, OP_MAP_SET, idx);
                    put_bytes(&mut ops, k.as_bytes());
                    put_bytes(&mut ops, &b);
                }
            }
        }
    }
    e.ops.extend_from_slice(&ops);
    e.gen += 1; // the handles' caches predate these writes
    Ok(())
}

/// The compact JSON of one value of the initial state, checked against the variable's type.
fn initial_value(v: &VarInfo, raw: Value<'_>) -> Result<Vec<u8>, Error> {
    if raw.is_null() {
        return Err(Error::new(ErrorKind::NullState, "groupstate: null is not a valid state value"));
    }
    let b = compact(raw.raw());
    (v.check)(&b)?;
    Ok(b)
}

/// `json` (valid JSON) without the white space outside strings.
fn compact(json: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(json.len());
    let (mut in_str, mut esc) = (false, false);
    for &c in json {
        if in_str {
            out.push(c);
            if esc {
                esc = false;
            } else if c == b'\\' {
                esc = true;
            } else if c == b'"' {
                in_str = false;
            }
        } else if !matches!(c, b' ' | b'\t' | b'\n' | b'\r') {
            if c == b'"' {
                in_str = true;
            }
            out.push(c);
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Codec

/// How a state value, list element or map value is stored: as one JSON value. Implemented for
/// `bool`, the integer types, `f64`, `String`, [`RawJson`] (any JSON text, e.g. an object
/// built with [`json::ObjectWriter`] and read with [`RawJson::object`]) and `Vec<T>` (a JSON
/// array); implement it for your own types with the [`json`] module.
pub trait StateCodec: Sized {
    /// Appends the JSON of `self` to `out`. `null` is refused by the state handles.
    fn encode_json(&self, out: &mut Vec<u8>) -> Result<(), Error>;
    /// Decodes one JSON value.
    fn decode_json(json: &[u8]) -> Result<Self, Error>;
}

impl StateCodec for bool {
    fn encode_json(&self, out: &mut Vec<u8>) -> Result<(), Error> {
        out.extend_from_slice(if *self { b"true" } else { b"false" });
        Ok(())
    }
    fn decode_json(json: &[u8]) -> Result<Self, Error> {
        Value::parse(json)?.as_bool()
    }
}

impl StateCodec for i64 {
    fn encode_json(&self, out: &mut Vec<u8>) -> Result<(), Error> {
        use std::io::Write;
        let _ = write!(out, "{}", self);
        Ok(())
    }
    fn decode_json(json: &[u8]) -> Result<Self, Error> {
        Value::parse(json)?.as_i64()
    }
}

macro_rules! int_codec {
    ($($t:ty),*) => {$(
        impl StateCodec for $t {
            fn encode_json(&self, out: &mut Vec<u8>) -> Result<(), Error> {
                use std::io::Write;
                let _ = write!(out, "{}", self);
                Ok(())
            }
            fn decode_json(json: &[u8]) -> Result<Self, Error> {
                let v = Value::parse(json)?;
                let n = if v.kind() == Kind::Number {
                    std::str::from_utf8(v.raw()).ok().and_then(|s| s.parse::<$t>().ok())
                } else {
                    None
                };
                match n {
                    Some(n) => Ok(n),
                    None => <$t>::try_from(v.as_i64()?).map_err(|_| {
                        Error::new(ErrorKind::Json, format!("json: want a {}, got {}", stringify!($t), String::from_utf8_lossy(v.raw())))
                    }),
                }
            }
        }
    )*};
}

int_codec!(i32, u32, u64, usize);

impl StateCodec for f64 {
    fn encode_json(&self, out: &mut Vec<u8>) -> Result<(), Error> {
        if !self.is_finite() {
            return Err(Error::new(ErrorKind::Json, format!("json: unsupported value {}", self)));
        }
        json::write_f64(out, *self);
        Ok(())
    }
    fn decode_json(json: &[u8]) -> Result<Self, Error> {
        Value::parse(json)?.as_f64()
    }
}

impl StateCodec for String {
    fn encode_json(&self, out: &mut Vec<u8>) -> Result<(), Error> {
        json::write_str(out, self);
        Ok(())
    }
    fn decode_json(json: &[u8]) -> Result<Self, Error> {
        Ok(Value::parse(json)?.as_str()?.into_owned())
    }
}

impl<T: StateCodec> StateCodec for Vec<T> {
    fn encode_json(&self, out: &mut Vec<u8>) -> Result<(), Error> {
        out.push(b'[');
        for (i, v) in self.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            v.encode_json(out)?;
        }
        out.push(b']');
        Ok(())
    }
    fn decode_json(json: &[u8]) -> Result<Self, Error> {
        Value::parse(json)?.as_array()?.map(|v| T::decode_json(v.raw())).collect()
    }
}

/// Any JSON value, as its text: the untyped state value.
#[derive(Clone, PartialEq, Eq)]
pub struct RawJson(Vec<u8>);

impl RawJson {
    /// `json` if it is one valid JSON value.
    pub fn new(json: impl Into<Vec<u8>>) -> Result<RawJson, Error> {
        let b = json.into();
        Value::parse(&b)?;
        Ok(RawJson(b))
    }

    /// The JSON text.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// The value, to read it.
    pub fn value(&self) -> Value<'_> {
        Value::parse(&self.0).expect("RawJson holds valid JSON")
    }

    /// The value as an object, to read its fields: `raw.object()?.i64("n")?`.
    pub fn object(&self) -> Result<json::Object<'_>, Error> {
        self.value().as_object()
    }

    pub fn into_bytes(self) -> Vec<u8> {
        self.0
    }
}

impl From<&json::ObjectWriter> for RawJson {
    fn from(w: &json::ObjectWriter) -> RawJson {
        RawJson(w.as_bytes().to_vec())
    }
}

impl AsRef<[u8]> for RawJson {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl fmt::Debug for RawJson {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RawJson({})", String::from_utf8_lossy(&self.0))
    }
}

impl StateCodec for RawJson {
    fn encode_json(&self, out: &mut Vec<u8>) -> Result<(), Error> {
        out.extend_from_slice(&self.0);
        Ok(())
    }
    fn decode_json(json: &[u8]) -> Result<Self, Error> {
        RawJson::new(json)
    }
}
