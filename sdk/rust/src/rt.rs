//! The ABI v1 machinery behind [`crate::export!`]: buffers, the init and process calls, host
//! imports.

use crate::{Action, Config, Emitter, GroupState, Handler, Key, Rows, TimeoutMode, ABI_VERSION};

#[cfg(target_arch = "wasm32")]
mod host {
    #[link(wasm_import_module = "groupstate")]
    extern "C" {
        pub fn group_begin(index: i32);
        pub fn log(level: i32, ptr: i32, len: i32);
    }
}

pub(crate) fn host_log(level: i32, msg: &[u8]) {
    #[cfg(target_arch = "wasm32")]
    unsafe {
        host::log(level, msg.as_ptr() as i32, msg.len() as i32)
    }
    #[cfg(not(target_arch = "wasm32"))]
    eprintln!("groupstate log {}: {}", level, String::from_utf8_lossy(msg));
}

fn group_begin(_index: u32) {
    #[cfg(target_arch = "wasm32")]
    unsafe {
        host::group_begin(_index as i32)
    }
}

/// Everything the module keeps between calls. The host drives an instance strictly
/// sequentially, so one global is enough.
pub(crate) struct Runtime {
    input: Vec<u8>,   // the buffer gs_alloc hands out; len == its usable size
    out: Vec<u8>,     // the last result
    scratch: Vec<u8>, // the state value after update, per group
    config: Option<Config>,
    handler: Option<Box<dyn Handler>>,
}

static mut RT: Runtime =
    Runtime { input: Vec::new(), out: Vec::new(), scratch: Vec::new(), config: None, handler: None };

fn rt() -> &'static mut Runtime {
    // Safety: WebAssembly instances here are single-threaded and the host never calls into an
    // instance while another call runs, so there is never a second live reference.
    unsafe { &mut *std::ptr::addr_of_mut!(RT) }
}

/// The largest input the SDK accepts (the host never sends more than 2^31 bytes).
const MAX_INPUT: usize = 1 << 31;

/// `gs_alloc`: a buffer of at least `size` bytes, or 0.
pub fn alloc(size: i32) -> i32 {
    let size = size as u32 as usize;
    match rt().ensure_input(size) {
        Some(p) => p as usize as i32,
        None => 0,
    }
}

impl Runtime {
    fn ensure_input(&mut self, size: usize) -> Option<*mut u8> {
        if size > MAX_INPUT {
            return None;
        }
        let want = size.max(1);
        if self.input.len() < want {
            // Grow by doubling, zero-filled once, so the host writes into initialized memory.
            let new = want.max(self.input.len() * 2).max(64 * 1024);
            let new = if new > MAX_INPUT && want <= MAX_INPUT { want } else { new };
            let len = self.input.len();
            let new = if self.input.try_reserve_exact(new - len).is_ok() {
                new
            } else if self.input.try_reserve_exact(want - len).is_ok() {
                want
            } else {
                return None;
            };
            self.input.resize(new, 0);
        }
        Some(self.input.as_mut_ptr())
    }

    /// The input the host wrote at `[ptr, ptr+len)`, which must be the buffer gs_alloc returned.
    fn input(&self, ptr: i32, len: i32) -> Option<&'static [u8]> {
        let (ptr, len) = (ptr as u32 as usize, len as u32 as usize);
        let base = self.input.as_ptr() as usize;
        if ptr < base || ptr - base > self.input.len() || len > self.input.len() - (ptr - base) {
            return None;
        }
        // Safety: inside the input buffer, which nothing touches until the call returns.
        Some(unsafe { std::slice::from_raw_parts(ptr as *const u8, len) })
    }

    fn pack(&self) -> i64 {
        (((self.out.as_ptr() as usize as u64) << 32) | self.out.len() as u64) as i64
    }
}

// ---------------------------------------------------------------------------------------------
// Little-endian, bounds-checked buffer access

struct Reader<'a> {
    b: &'a [u8],
    i: usize,
    failed: bool,
}

impl<'a> Reader<'a> {
    fn new(b: &'a [u8]) -> Self {
        Reader { b, i: 0, failed: false }
    }

    fn take(&mut self, n: usize) -> &'a [u8] {
        if self.failed || self.b.len() - self.i < n {
            self.failed = true;
            return &[];
        }
        let s = &self.b[self.i..self.i + n];
        self.i += n;
        s
    }

    fn u32(&mut self) -> u32 {
        let s = self.take(4);
        if s.len() < 4 {
            return 0;
        }
        u32::from_le_bytes([s[0], s[1], s[2], s[3]])
    }

    fn i64(&mut self) -> i64 {
        let s = self.take(8);
        if s.len() < 8 {
            return 0;
        }
        let mut a = [0u8; 8];
        a.copy_from_slice(s);
        i64::from_le_bytes(a)
    }

    fn bytes(&mut self) -> &'a [u8] {
        let n = self.u32() as usize;
        self.take(n)
    }

    fn at_end(&self) -> bool {
        !self.failed && self.i == self.b.len()
    }
}

fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_u32(out, b.len() as u32);
    out.extend_from_slice(b);
}

// ---------------------------------------------------------------------------------------------
// gs_init

/// `gs_init` for handler `H`.
pub fn init<H: Handler>(ptr: i32, len: i32) -> i64 {
    install_panic_hook();
    let rt = rt();
    rt.config = None;
    rt.handler = None;
    rt.out.clear();
    let res = match rt.input(ptr, len) {
        None => Err("groupstate: gs_init called with a buffer that gs_alloc did not return".to_string()),
        Some(buf) => init_with::<H>(buf),
    };
    match res {
        Ok((cfg, h)) => {
            rt.config = Some(cfg);
            rt.handler = Some(h);
            put_u32(&mut rt.out, 0);
            put_u32(&mut rt.out, 0);
        }
        Err(msg) => {
            put_u32(&mut rt.out, 1);
            put_bytes(&mut rt.out, msg.as_bytes());
        }
    }
    rt.pack()
}

fn init_with<H: Handler>(buf: &[u8]) -> Result<(Config, Box<dyn Handler>), String> {
    let cfg = parse_init(buf)?;
    let h = H::init(&cfg).map_err(|e| e.to_string())?;
    Ok((cfg, Box::new(h)))
}

pub(crate) fn parse_init(buf: &[u8]) -> Result<Config, String> {
    let mut r = Reader::new(buf);
    let version = r.u32();
    let mode = r.u32();
    let flags = r.u32();
    let name = r.bytes();
    let config = r.bytes();
    if !r.at_end() {
        return Err("groupstate: init buffer malformed".to_string());
    }
    if version != ABI_VERSION {
        return Err(format!("groupstate: host ABI version {}, module implements version {}", version, ABI_VERSION));
    }
    let mode = match mode {
        0 => TimeoutMode::None,
        1 => TimeoutMode::ProcessingTime,
        2 => TimeoutMode::EventTime,
        m => return Err(format!("groupstate: unknown timeout mode {}", m)),
    };
    let name = std::str::from_utf8(name).map_err(|_| "groupstate: deployment name is not UTF-8".to_string())?;
    Config::new(name, mode, flags & 1 != 0, config).map_err(|e| e.to_string())
}

// ---------------------------------------------------------------------------------------------
// gs_process

/// `gs_process`.
pub fn process(ptr: i32, len: i32) -> i64 {
    let rt = rt();
    rt.out.clear();
    match rt.input(ptr, len) {
        None => call_error(
            &mut rt.out,
            "groupstate: gs_process called with a buffer that gs_alloc did not return",
        ),
        Some(buf) => match (&rt.config, &mut rt.handler) {
            (Some(cfg), Some(h)) => process_buffer(&mut **h, cfg, buf, &mut rt.out, &mut rt.scratch),
            _ => call_error(&mut rt.out, "groupstate: process called before a successful init"),
        },
    }
    rt.pack()
}

fn call_error(out: &mut Vec<u8>, msg: &str) {
    out.clear();
    put_u32(out, 1);
    put_bytes(out, msg.as_bytes());
}

/// Runs every group of the process buffer `buf` through `h`, writing the result buffer (or a
/// whole-call error) to `out`.
pub(crate) fn process_buffer(h: &mut dyn Handler, cfg: &Config, buf: &[u8], out: &mut Vec<u8>, scratch: &mut Vec<u8>) {
    out.clear();
    let mut r = Reader::new(buf);
    let count = r.u32();
    let t = r.i64();
    let w = r.i64();
    if r.failed {
        return call_error(out, "groupstate: process buffer malformed: short header");
    }
    put_u32(out, 0);
    put_u32(out, count);
    for i in 0..count {
        let flags = r.u32();
        let key = r.bytes();
        let state = r.bytes();
        let n = r.u32() as usize;
        let rows_at = r.i;
        for _ in 0..n {
            r.bytes();
            if r.failed {
                break;
            }
        }
        if r.failed {
            return call_error(out, &format!("groupstate: process buffer malformed at group {}", i));
        }
        let rows = Rows::new(&buf[rows_at..r.i], n);
        let initial = if flags & 2 != 0 { Some(state) } else { None };

        group_begin(i);
        let mut gs = GroupState::new(cfg, initial, flags & 1 != 0, t, w, scratch);
        let emits_at = out.len();
        put_u32(out, 0);
        let mut em = Emitter::new(out);
        let res = h.handle(&Key::new(key), rows, &mut gs, &mut em);
        let emitted = em.count();
        match res {
            Ok(()) => {
                out[emits_at..emits_at + 4].copy_from_slice(&emitted.to_le_bytes());
                put_u32(out, 0);
                put_u32(out, gs.action() as u32);
                let timeout = gs.timeout_ms();
                put_u32(out, if timeout != 0 { 1 } else { 0 });
                out.extend_from_slice(&timeout.to_le_bytes());
                match gs.action() {
                    Action::Update => put_bytes(out, gs.get_option().unwrap_or(&[])),
                    _ => put_u32(out, 0),
                }
                put_u32(out, 0);
            }
            Err(e) => {
                // The host ignores a failed group's emits: drop them.
                out.truncate(emits_at + 4);
                put_u32(out, 1);
                put_u32(out, Action::Keep as u32);
                put_u32(out, 0);
                out.extend_from_slice(&0i64.to_le_bytes());
                put_u32(out, 0);
                put_bytes(out, e.message().as_bytes());
            }
        }
    }
    if !r.at_end() {
        call_error(out, "groupstate: trailing bytes in process buffer");
    }
}

// ---------------------------------------------------------------------------------------------
// Panics

/// A panic cannot be caught on wasm32 (no unwinding): it traps, the host retries the call's
/// groups one by one on a fresh instance, and the panicking group fails with
/// `module trapped: wasm error: unreachable (stderr: panic: ...)`. The hook puts the panic's
/// message on stderr (wasm32-wasi, where the host appends it to the error) or in the log.
fn install_panic_hook() {
    static mut DONE: bool = false;
    // Safety: single-threaded, see rt().
    unsafe {
        if DONE {
            return;
        }
        DONE = true;
    }
    std::panic::set_hook(Box::new(|info| {
        let msg = if let Some(s) = info.payload().downcast_ref::<&str>() {
            s.to_string()
        } else if let Some(s) = info.payload().downcast_ref::<String>() {
            s.clone()
        } else {
            "(non-string payload)".to_string()
        };
        let line = match info.location() {
            Some(l) => format!("panic: {} at {}:{}:{}", msg, l.file(), l.line(), l.column()),
            None => format!("panic: {}", msg),
        };
        if cfg!(target_os = "wasi") || !cfg!(target_arch = "wasm32") {
            eprintln!("{}", line);
        } else {
            host_log(crate::Level::Error as i32, line.as_bytes());
        }
    }));
}
