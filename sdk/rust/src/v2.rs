//! The ABI v2 machinery behind [`crate::export_processor!`] (abi/README.md section 9): the init
//! result with the variable declarations, the process buffer of DATA / TIMERS / INITIAL
//! groups, op lists, the `groupstate.state` import and the result buffer v2.
//!
//! Only the v2 entry points reference this module, so a v1 module (built with
//! [`crate::export!`]) does not contain it and does not import `groupstate.state`.

use std::cell::RefCell;
use std::rc::Rc;

use crate::processor::{InputRows, ProcessorHandle, StatefulProcessor, Timers};
use crate::wire::{self, call_error, put_bytes, put_u32, Reader};
pub(crate) use crate::wire::put_i64;
use crate::{Config, Emitter, Error, ErrorKind, Key, TimeoutMode};

/// The ABI version of a module that registers a processor.
pub const ABI_VERSION_V2: u32 = 2;

/// Init flag `HAS_WATERMARK` (abi/README.md 4.1).
pub(crate) const INIT_HAS_WATERMARK: u32 = 1 << 0;

/// Init flag `HAS_INPUTS` (abi/README.md 4.1): the input names follow the config, and each row
/// of a DATA group starts with the index of its input.
pub(crate) const INIT_HAS_INPUTS: u32 = 1 << 1;

/// The init flags this SDK implements; a v2 module fails its init when the host sets another.
pub(crate) const INIT_KNOWN_FLAGS: u32 = INIT_HAS_WATERMARK | INIT_HAS_INPUTS;

/// At most this many inputs (abi/README.md 9.3a).
pub const MAX_INPUTS: usize = 16;

/// At most this many bytes in an input's name.
pub const MAX_INPUT_NAME_LEN: usize = 32;

/// At most this many state variables (abi/README.md 9.2).
pub const MAX_VARS: usize = 256;

/// At most this many bytes in a state variable's name.
pub const MAX_VAR_NAME_LEN: usize = 64;

/// The `max_bytes` of LIST_READ and MAP_READ: how much of a collection one state call fetches.
pub(crate) const DEFAULT_PAGE_BYTES: u32 = 64 << 10;

/// The initial capacity of the answers buffer; it grows when the host reports bigger answers.
pub(crate) const MIN_RESP_BYTES: usize = DEFAULT_PAGE_BYTES as usize + (4 << 10);

/// What `groupstate.state` returns for a refused request.
pub const STATE_REFUSED: i32 = -1;

// ---------------------------------------------------------------------------------------------
// Op codes (abi/README.md 9.4)

pub(crate) const OP_VALUE_GET: u8 = 0x01;
pub(crate) const OP_VALUE_SET: u8 = 0x02;
pub(crate) const OP_VALUE_CLEAR: u8 = 0x03;
pub(crate) const OP_LIST_READ: u8 = 0x10;
pub(crate) const OP_LIST_APPEND: u8 = 0x11;
pub(crate) const OP_LIST_PUT: u8 = 0x12;
pub(crate) const OP_LIST_CLEAR: u8 = 0x13;
pub(crate) const OP_LIST_EXISTS: u8 = 0x14;
pub(crate) const OP_MAP_GET: u8 = 0x20;
pub(crate) const OP_MAP_CONTAINS: u8 = 0x21;
pub(crate) const OP_MAP_SET: u8 = 0x22;
pub(crate) const OP_MAP_REMOVE: u8 = 0x23;
pub(crate) const OP_MAP_READ: u8 = 0x24;
pub(crate) const OP_MAP_CLEAR: u8 = 0x25;
pub(crate) const OP_MAP_EXISTS: u8 = 0x26;
pub(crate) const OP_TIMER_REGISTER: u8 = 0x30;
pub(crate) const OP_TIMER_DELETE: u8 = 0x31;
pub(crate) const OP_TIMER_LIST: u8 = 0x32;

pub(crate) fn op_name(op: u8) -> &'static str {
    match op {
        OP_VALUE_GET => "VALUE_GET",
        OP_VALUE_SET => "VALUE_SET",
        OP_VALUE_CLEAR => "VALUE_CLEAR",
        OP_LIST_READ => "LIST_READ",
        OP_LIST_APPEND => "LIST_APPEND",
        OP_LIST_PUT => "LIST_PUT",
        OP_LIST_CLEAR => "LIST_CLEAR",
        OP_LIST_EXISTS => "LIST_EXISTS",
        OP_MAP_GET => "MAP_GET",
        OP_MAP_CONTAINS => "MAP_CONTAINS",
        OP_MAP_SET => "MAP_SET",
        OP_MAP_REMOVE => "MAP_REMOVE",
        OP_MAP_READ => "MAP_READ",
        OP_MAP_CLEAR => "MAP_CLEAR",
        OP_MAP_EXISTS => "MAP_EXISTS",
        OP_TIMER_REGISTER => "TIMER_REGISTER",
        OP_TIMER_DELETE => "TIMER_DELETE",
        OP_TIMER_LIST => "TIMER_LIST",
        _ => "unknown",
    }
}

/// The kind of a state variable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VarKind {
    Value = 1,
    List = 2,
    Map = 3,
}

impl VarKind {
    /// "value", "list" or "map".
    pub fn name(self) -> &'static str {
        match self {
            VarKind::Value => "value",
            VarKind::List => "list",
            VarKind::Map => "map",
        }
    }
}

/// The kind of the groups of a process buffer v2 (abi/README.md 9.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum GroupKind {
    Data = 0,
    Timers = 1,
    Initial = 2,
}

impl GroupKind {
    fn name(self) -> &'static str {
        match self {
            GroupKind::Data => "DATA",
            GroupKind::Timers => "TIMERS",
            GroupKind::Initial => "INITIAL",
        }
    }
}

/// Stands in for the host's `groupstate.group_begin` and `groupstate.state` imports (abi/README.md
/// 9.1 and 9.5) when a [`ProcessorModule`] runs natively, in tests. On wasm32 the imports are
/// used unless one is set.
pub trait StateHost {
    /// Called before the processor runs for the group at `index` of the current process
    /// buffer; the ops of the `state` calls that follow are that group's.
    fn group_begin(&mut self, index: u32);

    /// Applies the op list `req` for the current group and writes the answers of its read ops
    /// to `resp` when they fit. Returns the size of the answers, or -1 ([`STATE_REFUSED`]).
    fn state(&mut self, req: &[u8], resp: &mut [u8]) -> i32;
}

// ---------------------------------------------------------------------------------------------
// Op list writer

pub(crate) fn op_var(out: &mut Vec<u8>, op: u8, var: u32) {
    out.push(op);
    put_u32(out, var);
}

// ---------------------------------------------------------------------------------------------
// Declarations

/// One declared state variable.
pub(crate) struct VarInfo {
    pub(crate) name: String,
    pub(crate) kind: VarKind,
    pub(crate) ttl_ms: i64,
    /// Whether one value, list element or map value decodes into the variable's type.
    pub(crate) check: fn(&[u8]) -> Result<(), Error>,
}

/// What is wrong with a variable name, or `None`.
pub(crate) fn var_name_problem(name: &str) -> Option<String> {
    let b = name.as_bytes();
    if b.is_empty() {
        return Some("is empty".to_string());
    }
    if b.len() > MAX_VAR_NAME_LEN {
        return Some(format!("is longer than {} bytes", MAX_VAR_NAME_LEN));
    }
    if !b[0].is_ascii_lowercase() {
        return Some("does not start with a letter a-z".to_string());
    }
    for (i, &c) in b.iter().enumerate() {
        if !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'_') {
            return Some(format!("has a byte other than a-z, 0-9 and _ at offset {}", i));
        }
    }
    None
}

// ---------------------------------------------------------------------------------------------
// The engine: what the state handles share

/// The module's v2 state: its declarations, and the group call in progress. The processor's
/// handles hold an `Rc` of it; a WebAssembly instance is single-threaded.
pub(crate) struct Engine {
    pub(crate) mode: TimeoutMode,
    pub(crate) has_watermark: bool,
    pub(crate) vars: Vec<VarInfo>,
    pub(crate) decl_err: Option<Error>,

    pub(crate) ops: Vec<u8>, // the group's writes not sent yet, then a request's reads
    resp: Vec<u8>,           // the answers of the last request (its first resp_len bytes)
    resp_len: usize,
    host: Option<Box<dyn StateHost>>,
    pub(crate) page_bytes: u32,
    resp_min: usize,
    pub(crate) requests: u64, // state calls made, for tests

    // The call in progress.
    pub(crate) in_call: bool,
    pub(crate) gen: u64, // counts groups (and initial-state writes); value caches are per gen
    pub(crate) t: i64,
    pub(crate) w: i64,
    pub(crate) failed: Option<Error>, // a failure recorded outside the processor's return value
    pub(crate) kind: GroupKind,
    pub(crate) group_timers: Vec<i64>, // the timers of a TIMERS group
    pub(crate) timer_idx: Option<usize>,
    pub(crate) skip: Vec<bool>, // in a TIMERS group: the timers an earlier call deleted
}

pub(crate) type Shared = Rc<RefCell<Engine>>;

impl Engine {
    pub(crate) fn new() -> Engine {
        Engine {
            mode: TimeoutMode::None,
            has_watermark: false,
            vars: Vec::new(),
            decl_err: None,
            ops: Vec::new(),
            resp: Vec::new(),
            resp_len: 0,
            host: None,
            page_bytes: DEFAULT_PAGE_BYTES,
            resp_min: MIN_RESP_BYTES,
            requests: 0,
            in_call: false,
            gen: 0,
            t: 0,
            w: 0,
            failed: None,
            kind: GroupKind::Data,
            group_timers: Vec::new(),
            timer_idx: None,
            skip: Vec::new(),
        }
    }

    /// Panics when a handle is used outside a call of the processor (a programming error, as
    /// in the Go SDK).
    pub(crate) fn begin(&self, what: &str) {
        if !self.in_call {
            panic!("groupstate: {} used outside a call of the processor", what);
        }
    }

    /// Records `e` as the call's failure unless one is recorded already, and returns the
    /// recorded one: the call fails with it whatever the processor returns.
    pub(crate) fn fail(&mut self, e: Error) -> Error {
        if self.failed.is_none() {
            self.failed = Some(e);
        }
        self.failed.clone().unwrap()
    }

    /// The recorded failure, if any: a call that failed stops talking to the host.
    pub(crate) fn check(&self) -> Result<(), Error> {
        match &self.failed {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }

    /// Sends the pending writes and the read ops appended since `mark` through the state
    /// function (abi/README.md 9.5) and returns the answers, valid until the next request. When
    /// they do not fit, the host applied the writes all the same: only the reads are sent again,
    /// with a buffer of the size the host asked for. A refused request (or a host that
    /// misbehaves) fails the call.
    pub(crate) fn request(&mut self, mark: usize) -> Result<&[u8], Error> {
        if let Err(e) = self.check() {
            self.ops.truncate(mark);
            return Err(e);
        }
        if self.resp.len() < self.resp_min {
            self.resp.resize(self.resp_min, 0);
        }
        let mut from = 0;
        let mut attempt = 0;
        loop {
            let n = self.call_host(from)?;
            if n < 0 {
                self.ops.clear();
                let e = if n == STATE_REFUSED {
                    Error::new(ErrorKind::Handler, "groupstate: the host refused a state request (see the host's log)")
                } else {
                    Error::new(ErrorKind::Handler, format!("groupstate: the state function returned {}", n))
                };
                return Err(self.fail(e));
            }
            let n = n as usize;
            if n <= self.resp.len() {
                self.ops.clear();
                self.resp_len = n;
                return Ok(&self.resp[..n]);
            }
            if attempt == 3 {
                self.ops.clear();
                let e = Error::new(ErrorKind::Handler, format!("groupstate: the state answers keep growing ({} bytes)", n));
                return Err(self.fail(e));
            }
            attempt += 1;
            self.resp.resize(n, 0);
            from = mark; // the writes were applied: resend only the reads
        }
    }

    fn call_host(&mut self, from: usize) -> Result<i32, Error> {
        self.requests += 1;
        let req = &self.ops[from..];
        if let Some(h) = self.host.as_mut() {
            return Ok(h.state(req, &mut self.resp));
        }
        #[cfg(target_arch = "wasm32")]
        {
            return Ok(wire::host_state(req, &mut self.resp));
        }
        #[cfg(not(target_arch = "wasm32"))]
        {
            let _ = req;
            Err(self.fail(Error::new(
                ErrorKind::Handler,
                "groupstate: no state host: outside WebAssembly a processor's module needs ProcessorModule::set_state_host",
            )))
        }
    }

    /// [`Engine::request`] for one read op appended since `mark`, whose answer is checked by
    /// `decode` (which must consume it all); a malformed answer fails the call.
    pub(crate) fn read<T>(
        &mut self,
        mark: usize,
        op: u8,
        decode: impl FnOnce(&mut Reader<'_>) -> Result<T, String>,
    ) -> Result<T, Error> {
        let res = {
            let b = self.request(mark)?;
            let mut r = Reader::new(b);
            decode(&mut r).and_then(|v| {
                if r.failed {
                    Err("truncated".to_string())
                } else if r.i != b.len() {
                    Err("trailing bytes after the answer".to_string())
                } else {
                    Ok(v)
                }
            })
        };
        res.map_err(|m| self.fail(malformed_answer(op, &m)))
    }

    /// The answers of the last request.
    pub(crate) fn last_answers(&self) -> &[u8] {
        &self.resp[..self.resp_len]
    }

    fn group_begin(&mut self, i: u32) {
        wire::group_begin(i);
        if let Some(h) = self.host.as_mut() {
            h.group_begin(i);
        }
        self.ops.clear();
        self.gen += 1;
        self.failed = None;
        self.timer_idx = None;
        self.skip.clear();
    }

    /// In a TIMERS group, a call deleted the timer at `ts`: when it is still to fire in the
    /// group, it is skipped (abi/README.md 9.3), even if a later call registers it again.
    pub(crate) fn mark_deleted(&mut self, ts: i64) {
        if self.kind != GroupKind::Timers {
            return;
        }
        let cur = match self.timer_idx {
            Some(i) => i,
            None => return,
        };
        if let Ok(j) = self.group_timers.binary_search(&ts) {
            if j > cur {
                self.skip[j] = true;
            }
        }
    }

    pub(crate) fn var_index(&self, name: &str) -> Option<usize> {
        self.vars.iter().position(|v| v.name == name)
    }
}

pub(crate) fn malformed_answer(op: u8, what: &str) -> Error {
    Error::new(ErrorKind::Handler, format!("groupstate: state answer of {}: malformed: {}", op_name(op), what))
}

/// Reads a `u8` flag of an answer, which must be 0 or 1.
pub(crate) fn read_flag(r: &mut Reader<'_>, field: &str) -> Result<bool, String> {
    let b = r.take(1);
    match b.first() {
        None => Err("truncated".to_string()),
        Some(0) => Ok(false),
        Some(1) => Ok(true),
        Some(v) => Err(format!("{} is {}, not 0 or 1", field, v)),
    }
}

pub(crate) fn read_u64(r: &mut Reader<'_>) -> u64 {
    r.i64() as u64
}

// ---------------------------------------------------------------------------------------------
// The module: init and process

/// Runs a [`StatefulProcessor`] as an ABI v2 module: what [`crate::export_processor!`] exports,
/// and what a native test drives with [`ProcessorModule::set_state_host`].
pub struct ProcessorModule<P: StatefulProcessor> {
    e: Shared,
    timers: Timers,
    config: Option<Config>,
    inputs: Vec<String>, // the deployment's input names (HAS_INPUTS), empty without
    processor: Option<P>,
    out: Vec<u8>,
}

impl<P: StatefulProcessor> Default for ProcessorModule<P> {
    fn default() -> Self {
        Self::new()
    }
}

impl<P: StatefulProcessor> ProcessorModule<P> {
    pub fn new() -> Self {
        let e: Shared = Rc::new(RefCell::new(Engine::new()));
        ProcessorModule {
            timers: Timers { e: e.clone() },
            e,
            config: None,
            inputs: Vec::new(),
            processor: None,
            out: Vec::new(),
        }
    }

    /// Makes the module send its state requests to `h` instead of the host's imports. Outside
    /// WebAssembly a module needs one.
    pub fn set_state_host(&mut self, h: Box<dyn StateHost>) {
        self.e.borrow_mut().host = Some(h);
    }

    /// Sets the `max_bytes` of the list and map reads (default 64 KiB) and the initial size of
    /// the answers buffer, for tests of paging and of answers that do not fit.
    #[doc(hidden)]
    pub fn set_sizes(&mut self, page_bytes: u32, resp_min: usize) {
        let mut e = self.e.borrow_mut();
        e.page_bytes = page_bytes;
        e.resp_min = resp_min;
        e.resp = Vec::new();
    }

    /// The number of state calls made so far.
    #[doc(hidden)]
    pub fn requests(&self) -> u64 {
        self.e.borrow().requests
    }

    /// The names of the deployment's inputs given by the last init (empty without
    /// `inputs:` in the spec).
    pub fn inputs(&self) -> &[String] {
        &self.inputs
    }

    /// The processor, after a successful init.
    pub fn processor(&mut self) -> Option<&mut P> {
        self.processor.as_mut()
    }

    /// `gs_init`: the init buffer in, the init result v2 out (abi/README.md 9.2).
    pub fn init(&mut self, buf: &[u8]) -> &[u8] {
        self.config = None;
        self.inputs.clear();
        self.processor = None;
        self.out.clear();
        match self.init_with(buf) {
            Ok((cfg, p)) => {
                self.config = Some(cfg);
                self.processor = Some(p);
                put_u32(&mut self.out, 0);
                put_u32(&mut self.out, 0);
                let e = self.e.borrow();
                put_u32(&mut self.out, e.vars.len() as u32);
                for v in &e.vars {
                    put_bytes(&mut self.out, v.name.as_bytes());
                    put_u32(&mut self.out, v.kind as u32);
                    put_i64(&mut self.out, v.ttl_ms);
                }
            }
            Err(msg) => {
                put_u32(&mut self.out, 1);
                put_bytes(&mut self.out, msg.as_bytes());
            }
        }
        &self.out
    }

    fn init_with(&mut self, buf: &[u8]) -> Result<(Config, P), String> {
        let (cfg, inputs) = parse_init_v2(buf)?;
        self.inputs = inputs;
        {
            let mut e = self.e.borrow_mut();
            e.mode = cfg.timeout_mode();
            e.has_watermark = cfg.has_watermark();
            e.vars.clear();
            e.decl_err = None;
        }
        let p = {
            let mut h = ProcessorHandle { e: &self.e, config: &cfg, inputs: &self.inputs };
            P::init(&mut h).map_err(|e| e.to_string())?
        };
        let e = self.e.borrow();
        if let Some(err) = &e.decl_err {
            return Err(err.to_string());
        }
        if e.vars.len() > MAX_VARS {
            return Err(format!(
                "groupstate: {} state variables declared, at most {} are allowed",
                e.vars.len(),
                MAX_VARS
            ));
        }
        drop(e);
        Ok((cfg, p))
    }

    /// `gs_process`: a process buffer v2 in, a result buffer v2 (or a whole-call error) out
    /// (abi/README.md 9.3 and 9.6).
    pub fn process(&mut self, buf: &[u8]) -> &[u8] {
        let mut out = std::mem::take(&mut self.out);
        out.clear();
        match self.processor.as_mut() {
            None => call_error(&mut out, "groupstate: process called before a successful init"),
            Some(p) => process_buffer(p, &self.e, &mut self.timers, &self.inputs, buf, &mut out),
        }
        self.out = out;
        &self.out
    }
}

/// Parses the init buffer of a v2 module (abi/README.md 4.1 with `abi_version` 2): the config,
/// and the input names with `HAS_INPUTS`.
fn parse_init_v2(buf: &[u8]) -> Result<(Config, Vec<String>), String> {
    let malformed = || "groupstate: init buffer malformed".to_string();
    let mut r = Reader::new(buf);
    let version = r.u32();
    let mode = r.u32();
    let flags = r.u32();
    if r.failed {
        return Err(malformed());
    }
    if version != ABI_VERSION_V2 {
        return Err(format!(
            "groupstate: host ABI version {}, module implements version {}",
            version, ABI_VERSION_V2
        ));
    }
    if flags & !INIT_KNOWN_FLAGS != 0 {
        // What follows the config may be laid out as this SDK does not know: stop here.
        return Err(format!(
            "groupstate: host sets init flags {:#x} this SDK does not implement (rebuild with a newer SDK)",
            flags & !INIT_KNOWN_FLAGS
        ));
    }
    let name = r.bytes();
    let config = r.bytes();
    let mut inputs = Vec::new();
    if flags & INIT_HAS_INPUTS != 0 {
        let n = r.u32();
        if r.failed {
            return Err(malformed());
        }
        if n == 0 || n as usize > MAX_INPUTS {
            return Err(format!("{}: input_count {} (want 1 to {})", malformed(), n, MAX_INPUTS));
        }
        for i in 0..n as usize {
            let b = r.bytes();
            if r.failed {
                return Err(malformed());
            }
            if let Some(p) = input_name_problem(b) {
                return Err(format!("{}: input {}: name {}", malformed(), i, p));
            }
            let name = String::from_utf8_lossy(b).into_owned(); // ASCII: checked above
            if let Some(j) = inputs.iter().position(|x| *x == name) {
                return Err(format!("{}: input {}: name {:?} already used by input {}", malformed(), i, name, j));
            }
            inputs.push(name);
        }
    }
    if !r.at_end() {
        return Err(malformed());
    }
    let mode = match mode {
        0 => TimeoutMode::None,
        1 => TimeoutMode::ProcessingTime,
        2 => TimeoutMode::EventTime,
        m => return Err(format!("groupstate: unknown timeout mode {}", m)),
    };
    let name = std::str::from_utf8(name).map_err(|_| "groupstate: deployment name is not UTF-8".to_string())?;
    let cfg = Config::new(name, mode, flags & INIT_HAS_WATERMARK != 0, config).map_err(|e| e.to_string())?;
    Ok((cfg, inputs))
}

/// What is wrong with an input name (abi/README.md 9.3a: 1-32 bytes of `[a-z0-9_-]` starting
/// with a letter), or `None`.
fn input_name_problem(b: &[u8]) -> Option<String> {
    if b.is_empty() {
        return Some("is empty".to_string());
    }
    if b.len() > MAX_INPUT_NAME_LEN {
        return Some(format!("is longer than {} bytes", MAX_INPUT_NAME_LEN));
    }
    if !b[0].is_ascii_lowercase() {
        return Some("does not start with a letter a-z".to_string());
    }
    match b.iter().position(|&c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'_' || c == b'-')) {
        Some(i) => Some(format!("has a byte other than a-z, 0-9, _ and - at offset {}", i)),
        None => None,
    }
}

/// One group of a process buffer v2.
struct Group<'a> {
    kind: GroupKind,
    key: &'a [u8],
    count: u32,
    body: &'a [u8], // the rows, or the timers
    initial: &'a [u8],
}

/// Reads and checks the next group (abi/README.md 9.3); `first` is the kind of the buffer's
/// first group, `inputs` the number of the deployment's inputs (0 without `HAS_INPUTS`: rows
/// have no input index).
fn next_group<'a>(r: &mut Reader<'a>, first: Option<GroupKind>, inputs: usize) -> Result<Group<'a>, String> {
    let kind = r.u32();
    let key = r.bytes();
    if r.failed {
        return Err("truncated kind or key".to_string());
    }
    let kind = match kind {
        0 => GroupKind::Data,
        1 => GroupKind::Timers,
        2 => GroupKind::Initial,
        k => return Err(format!("unknown kind {}", k)),
    };
    if let Some(f) = first {
        if f != kind {
            return Err(format!(
                "kind {} after {} groups (a process buffer holds one phase)",
                kind.name(),
                f.name()
            ));
        }
    }
    let mut g = Group { kind, key, count: 0, body: &[], initial: &[] };
    match kind {
        GroupKind::Data => {
            let n = r.u32();
            let start = r.i;
            for j in 0..n {
                if inputs > 0 {
                    let input = r.u32();
                    if !r.failed && input as usize >= inputs {
                        return Err(format!(
                            "row {}: input index {} out of range (the deployment has {} inputs)",
                            j, input, inputs
                        ));
                    }
                }
                r.bytes();
                if r.failed {
                    break;
                }
            }
            if r.failed {
                return Err("rows truncated".to_string());
            }
            if n == 0 {
                return Err("DATA group without rows".to_string());
            }
            g.count = n;
            g.body = &r.b[start..r.i];
        }
        GroupKind::Timers => {
            let n = r.u32();
            if r.failed || (n as u64) * 8 > (r.b.len() - r.i) as u64 {
                return Err("timers truncated".to_string());
            }
            if n == 0 {
                return Err("TIMERS group without timers".to_string());
            }
            let body = r.take(8 * n as usize);
            let mut prev = i64::MIN;
            for (i, c) in body.chunks(8).enumerate() {
                let ts = i64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
                if i > 0 && ts <= prev {
                    return Err(format!("timers not in strictly ascending order at timer {}", i));
                }
                prev = ts;
            }
            g.count = n;
            g.body = body;
        }
        GroupKind::Initial => {
            g.initial = r.bytes();
            if r.failed {
                return Err("initial state truncated".to_string());
            }
        }
    }
    Ok(g)
}

/// Runs every group of the process buffer `buf` through `p`, writing the result buffer v2 (or
/// a whole-call error) to `out`.
fn process_buffer<P: StatefulProcessor>(
    p: &mut P,
    e: &Shared,
    timers: &mut Timers,
    inputs: &[String],
    buf: &[u8],
    out: &mut Vec<u8>,
) {
    out.clear();
    let mut r = Reader::new(buf);
    let count = r.u32();
    let t = r.i64();
    let w = r.i64();
    if r.failed {
        return call_error(out, "groupstate: process buffer: malformed: process buffer shorter than its header");
    }
    {
        let mut en = e.borrow_mut();
        en.t = t;
        en.w = w;
    }
    put_u32(out, 0);
    put_u32(out, count);
    let mut first = None;
    for i in 0..count {
        let g = match next_group(&mut r, first, inputs.len()) {
            Ok(g) => g,
            Err(m) => {
                return call_error(out, &format!("groupstate: process buffer: malformed: group {}: {}", i, m));
            }
        };
        first = Some(g.kind);
        {
            let mut en = e.borrow_mut();
            en.kind = g.kind;
            en.group_timers.clear();
            if g.kind == GroupKind::Timers {
                for c in g.body.chunks(8) {
                    en.group_timers.push(i64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]));
                }
            }
            en.group_begin(i);
            en.in_call = true;
        }
        let emits_at = out.len();
        put_u32(out, 0);
        let mut em = Emitter::new(out);
        let res = call(p, e, timers, inputs, &g, &mut em);
        let emitted = em.count();
        let res = {
            let mut en = e.borrow_mut();
            en.in_call = false;
            match (res, en.failed.clone()) {
                (_, Some(f)) => Err(f), // a failed state request fails the call, whatever it returned
                (r, None) => r,
            }
        };
        match res {
            Ok(()) => {
                out[emits_at..emits_at + 4].copy_from_slice(&emitted.to_le_bytes());
                put_u32(out, 0);
                put_u32(out, 0);
                let en = e.borrow();
                put_bytes(out, &en.ops);
            }
            Err(err) => {
                // The host ignores a failed group's emits and every write of it: drop them.
                out.truncate(emits_at + 4);
                put_u32(out, 1);
                put_bytes(out, err.message().as_bytes());
                put_u32(out, 0);
            }
        }
        e.borrow_mut().ops.clear();
    }
    if !r.at_end() {
        call_error(
            out,
            &format!("groupstate: process buffer: malformed: trailing bytes after {} groups", count),
        );
    }
}

/// Calls the processor for one group: once for DATA and INITIAL, once per timer not deleted
/// by an earlier call of the group for TIMERS.
fn call<P: StatefulProcessor>(
    p: &mut P,
    e: &Shared,
    timers: &mut Timers,
    inputs: &[String],
    g: &Group<'_>,
    out: &mut Emitter<'_>,
) -> Result<(), Error> {
    let key = Key::new(g.key);
    match g.kind {
        GroupKind::Data => p.handle_input_rows(&key, InputRows::new(g.body, g.count as usize, inputs), timers, out),
        GroupKind::Initial => p.handle_initial_state(&key, g.initial, timers, out),
        GroupKind::Timers => {
            let n = g.count as usize;
            {
                let mut en = e.borrow_mut();
                en.skip.clear();
                en.skip.resize(n, false);
            }
            for i in 0..n {
                let ts = {
                    let mut en = e.borrow_mut();
                    if en.failed.is_some() {
                        break;
                    }
                    if en.skip[i] {
                        continue;
                    }
                    en.timer_idx = Some(i);
                    en.group_timers[i]
                };
                p.handle_expired_timer(&key, ts, timers, out)?;
            }
            Ok(())
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The exports of export_processor!

struct Global {
    module: Option<Box<dyn AnyModule>>,
    failed: Option<Box<dyn AnyModule>>, // a module whose init failed, holding its init result
}

/// A [`ProcessorModule`] of any processor type, for the one global of a WebAssembly instance.
trait AnyModule {
    fn init(&mut self, buf: &[u8]) -> &[u8];
    fn process(&mut self, buf: &[u8]) -> &[u8];
    fn last(&self) -> &[u8];
}

impl<P: StatefulProcessor> AnyModule for ProcessorModule<P> {
    fn init(&mut self, buf: &[u8]) -> &[u8] {
        ProcessorModule::init(self, buf)
    }
    fn process(&mut self, buf: &[u8]) -> &[u8] {
        ProcessorModule::process(self, buf)
    }
    fn last(&self) -> &[u8] {
        &self.out
    }
}

static mut GLOBAL: Global = Global { module: None, failed: None };

fn global() -> &'static mut Global {
    // Safety: as rt::rt(): one thread, one call at a time.
    unsafe { &mut *std::ptr::addr_of_mut!(GLOBAL) }
}

/// `gs_init` for processor `P`.
pub fn init<P: StatefulProcessor>(ptr: i32, len: i32) -> i64 {
    wire::install_panic_hook();
    let g = global();
    let bufs = wire::buffers();
    bufs.out.clear();
    g.module = None;
    match bufs.input(ptr, len) {
        None => {
            put_u32(&mut bufs.out, 1);
            put_bytes(&mut bufs.out, b"groupstate: gs_init called with a buffer that gs_alloc did not return");
            wire::pack(&bufs.out)
        }
        Some(buf) => {
            let mut m: Box<dyn AnyModule> = Box::new(ProcessorModule::<P>::new());
            let ok = m.init(buf).first() == Some(&0);
            let packed = wire::pack(m.last());
            if ok {
                g.module = Some(m);
            } else {
                // Keep the failed module's result alive until the next call.
                g.failed = Some(m);
            }
            packed
        }
    }
}

/// `gs_process` of a processor module.
pub fn process(ptr: i32, len: i32) -> i64 {
    let g = global();
    let bufs = wire::buffers();
    bufs.out.clear();
    match (bufs.input(ptr, len), g.module.as_mut()) {
        (None, _) => call_error(&mut bufs.out, "groupstate: gs_process called with a buffer that gs_alloc did not return"),
        (_, None) => call_error(&mut bufs.out, "groupstate: process called before a successful init"),
        (Some(buf), Some(m)) => return wire::pack(m.process(buf)),
    }
    wire::pack(&bufs.out)
}
