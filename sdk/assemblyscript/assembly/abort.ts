// The abort function AssemblyScript calls on `throw`, a failed assertion, an out-of-range
// index and the like. The default imports env.abort, which the host refuses; compile with
// `--use abort=__gs_abort` to route aborts here. It writes one line to stderr (the host
// appends it to the error: "module trapped: wasm error: unreachable (stderr: abort: ...)")
// and traps. It allocates nothing.

@external("wasi_snapshot_preview1", "fd_write")
declare function fd_write(fd: i32, iovs: usize, iovsLen: i32, written: usize): i32;

// iovec (8 bytes) + nwritten (4 bytes) + text (1000 bytes)
const SCRATCH = memory.data(1024);
const TEXT: usize = 16;
const TEXT_END: usize = 1016;

function put(at: usize, s: string | null, maxChars: i32): usize {
  if (s === null) return at;
  const n = min(s.length, maxChars);
  if (at + <usize>n * 3 > SCRATCH + TEXT_END) return at;
  return at + String.UTF8.encodeUnsafe(changetype<usize>(s), n, at, false, String.UTF8.ErrorMode.REPLACE);
}

function putU32(at: usize, v: u32): usize {
  let digits = 1;
  for (let t = v; t >= 10; t /= 10) digits++;
  for (let k = digits - 1; k >= 0; k--) {
    store<u8>(at + <usize>k, <u8>(0x30 + v % 10));
    v /= 10;
  }
  return at + <usize>digits;
}

// @ts-ignore: decorator
@global export function __gs_abort(message: string | null, fileName: string | null, line: u32, column: u32): void {
  let p = SCRATCH + TEXT;
  p = put(p, "abort: ", 10);
  p = put(p, message !== null ? message : "(no message)", 200);
  if (fileName !== null) {
    p = put(p, " at ", 4);
    p = put(p, fileName, 100);
    store<u8>(p++, 0x3a);
    p = putU32(p, line);
    store<u8>(p++, 0x3a);
    p = putU32(p, column);
  }
  store<u8>(p++, 0x0a);
  store<u32>(SCRATCH, <u32>(SCRATCH + TEXT));
  store<u32>(SCRATCH + 4, <u32>(p - SCRATCH - TEXT));
  fd_write(2, SCRATCH, 1, SCRATCH + 8);
  unreachable();
}
