//! The ABI v2 engine's own copy of rt.rs's buffers, readers and host calls.
//!
//! The copy is deliberate: the v1 machinery in rt.rs is shared with no v2 code, so a v1 module
//! (built with `export!`) compiles to exactly the bytes it did before ABI v2 existed (sharing
//! even a small private helper changes the compiler's inlining of the v1 code), and it never
//! references `groupstate.state`.

/// Little-endian, bounds-checked reads of a buffer.
pub(crate) struct Reader<'a> {
    pub(crate) b: &'a [u8],
    pub(crate) i: usize,
    pub(crate) failed: bool,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(b: &'a [u8]) -> Self {
        Reader { b, i: 0, failed: false }
    }

    /// A reader at offset `i` of `b`.
    pub(crate) fn at(b: &'a [u8], i: usize) -> Self {
        Reader { b, i, failed: i > b.len() }
    }

    pub(crate) fn take(&mut self, n: usize) -> &'a [u8] {
        if self.failed || self.b.len() - self.i < n {
            self.failed = true;
            return &[];
        }
        let s = &self.b[self.i..self.i + n];
        self.i += n;
        s
    }

    pub(crate) fn u32(&mut self) -> u32 {
        let s = self.take(4);
        if s.len() < 4 {
            return 0;
        }
        u32::from_le_bytes([s[0], s[1], s[2], s[3]])
    }

    pub(crate) fn i64(&mut self) -> i64 {
        let s = self.take(8);
        if s.len() < 8 {
            return 0;
        }
        let mut a = [0u8; 8];
        a.copy_from_slice(s);
        i64::from_le_bytes(a)
    }

    pub(crate) fn bytes(&mut self) -> &'a [u8] {
        let n = self.u32() as usize;
        self.take(n)
    }

    pub(crate) fn at_end(&self) -> bool {
        !self.failed && self.i == self.b.len()
    }
}

pub(crate) fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

pub(crate) fn put_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}

pub(crate) fn put_i64(out: &mut Vec<u8>, v: i64) {
    out.extend_from_slice(&v.to_le_bytes());
}

pub(crate) fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_u32(out, b.len() as u32);
    out.extend_from_slice(b);
}

/// Replaces `out` with a whole-call error (abi/README.md 4.5).
pub(crate) fn call_error(out: &mut Vec<u8>, msg: &str) {
    out.clear();
    put_u32(out, 1);
    put_bytes(out, msg.as_bytes());
}

#[cfg(target_arch = "wasm32")]
mod host {
    #[link(wasm_import_module = "groupstate")]
    extern "C" {
        pub fn group_begin(index: i32);
        #[cfg(not(target_os = "wasi"))]
        pub fn log(level: i32, ptr: i32, len: i32);
        pub fn state(req_ptr: i32, req_len: i32, resp_ptr: i32, resp_cap: i32) -> i32;
    }
}

/// `groupstate.group_begin` (a no-op natively).
pub(crate) fn group_begin(_index: u32) {
    #[cfg(target_arch = "wasm32")]
    unsafe {
        host::group_begin(_index as i32)
    }
}

/// `groupstate.state` on `[req)` and `[resp)`.
#[cfg(target_arch = "wasm32")]
pub(crate) fn host_state(req: &[u8], resp: &mut [u8]) -> i32 {
    // Safety: both ranges are live slices of this instance's memory.
    unsafe { host::state(req.as_ptr() as i32, req.len() as i32, resp.as_mut_ptr() as i32, resp.len() as i32) }
}

/// The input buffer `gs_alloc` hands out and the last result of a v2 module.
pub(crate) struct Buffers {
    input: Vec<u8>,
    pub(crate) out: Vec<u8>,
}

static mut BUFFERS: Buffers = Buffers { input: Vec::new(), out: Vec::new() };

/// The module's buffers.
pub(crate) fn buffers() -> &'static mut Buffers {
    // Safety: WebAssembly instances here are single-threaded and the host never calls into an
    // instance while another call runs, so there is never a second live reference.
    unsafe { &mut *std::ptr::addr_of_mut!(BUFFERS) }
}

/// The largest input the SDK accepts (the host never sends more than 2^31 bytes).
const MAX_INPUT: usize = 1 << 31;

/// `gs_alloc` of a v2 module: a buffer of at least `size` bytes, or 0.
pub fn alloc(size: i32) -> i32 {
    match buffers().ensure_input(size as u32 as usize) {
        Some(p) => p as usize as i32,
        None => 0,
    }
}

impl Buffers {
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
    pub(crate) fn input(&self, ptr: i32, len: i32) -> Option<&'static [u8]> {
        let (ptr, len) = (ptr as u32 as usize, len as u32 as usize);
        let base = self.input.as_ptr() as usize;
        if ptr < base || ptr - base > self.input.len() || len > self.input.len() - (ptr - base) {
            return None;
        }
        // Safety: inside the input buffer, which nothing touches until the call returns.
        Some(unsafe { std::slice::from_raw_parts(ptr as *const u8, len) })
    }
}

/// The packed pointer (abi/README.md 3.3) of `b`.
pub(crate) fn pack(b: &[u8]) -> i64 {
    (((b.as_ptr() as usize as u64) << 32) | b.len() as u64) as i64
}

/// Puts a panic's message on stderr (wasm32-wasi, where the host appends it to the error of
/// the trap) or in the log, as rt.rs does for v1 modules.
pub(crate) fn install_panic_hook() {
    static mut DONE: bool = false;
    // Safety: single-threaded, see buffers().
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
        #[cfg(all(target_arch = "wasm32", not(target_os = "wasi")))]
        unsafe {
            host::log(crate::Level::Error as i32, line.as_ptr() as i32, line.len() as i32)
        }
        #[cfg(any(target_os = "wasi", not(target_arch = "wasm32")))]
        eprintln!("{}", line);
    }));
}
