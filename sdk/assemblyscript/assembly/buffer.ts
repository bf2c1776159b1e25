// Guest memory for the ABI: the input buffer the host writes into (gs_alloc), the result
// buffer the host reads (gs_init / gs_process results), and a bounds-checked reader.

// ---- input -------------------------------------------------------------------------------
//
// The input buffer lives in pages this module grows itself, outside the allocator's heap:
// TLSF (the allocator of AssemblyScript's runtimes) only ever adds the pages it grows, so it
// never hands out this region, and a failed memory.grow becomes gs_alloc returning 0 instead
// of a trap. The region is reused and grown in place while it is the end of the memory.

let inPtr: usize = 0;
let inCap: usize = 0;

/** The largest input accepted (gs_alloc returns 0 above it). */
const MAX_INPUT: usize = 1 << 30;

/** Returns an offset of at least `size` writable bytes, or 0. */
export function inputBuffer(size: usize): usize {
  if (size == 0 || size > MAX_INPUT) return 0;
  if (size <= inCap) return inPtr;
  ensureHeap();
  const end = <usize>memory.size() << 16;
  const inPlace = inPtr != 0 && inPtr + inCap == end;
  const have = inPlace ? inCap : 0;
  let want = max(size, inCap << 1);
  want = (want + 0xffff) & ~<usize>0xffff;
  let pages = <i32>((want - have) >> 16);
  if (memory.grow(pages) < 0) {
    // Doubling failed: try exactly what is needed.
    want = (size + 0xffff) & ~<usize>0xffff;
    pages = <i32>((want - have) >> 16);
    if (memory.grow(pages) < 0) return 0;
  }
  inPtr = inPlace ? inPtr : end;
  inCap = want;
  return inPtr;
}

// ---- output ------------------------------------------------------------------------------

let outPtr: usize = 0;
let outCap: usize = 0;
/** The number of bytes written to the result buffer. */
export let outLen: usize = 0;

// The allocator initializes itself on the first allocation, taking every page up to the end
// of the memory; that must happen before inputBuffer grows pages of its own.
export function ensureHeap(): void {
  if (outPtr == 0) {
    outCap = 4096;
    outPtr = heap.alloc(outCap);
  }
}

/** Empties the result buffer. */
export function outReset(): void {
  ensureHeap();
  outLen = 0;
}

/** Drops what was written after offset `to`. */
export function outTruncate(to: usize): void {
  if (to < outLen) outLen = to;
}

/** Makes room for `n` more bytes and returns where they go. */
export function outReserve(n: usize): usize {
  const need = outLen + n;
  if (need > outCap) {
    let c = outCap << 1;
    if (c < need) c = need;
    outPtr = heap.realloc(outPtr, c);
    outCap = c;
  }
  return outPtr + outLen;
}

export function outU32(v: u32): void {
  store<u32>(outReserve(4), v);
  outLen += 4;
}

export function outI64(v: i64): void {
  store<i64>(outReserve(8), v);
  outLen += 8;
}

/** Overwrites the u32 at `at` (an offset from the start of the result). */
export function outPatchU32(at: usize, v: u32): void {
  store<u32>(outPtr + at, v);
}

/** Appends a byte string: u32 length and the bytes at [ptr, ptr+len). */
export function outBytes(ptr: usize, len: usize): void {
  const p = outReserve(4 + len);
  store<u32>(p, <u32>len);
  memory.copy(p + 4, ptr, len);
  outLen += 4 + len;
}

/** Appends a byte string holding `s` in UTF-8 (lone surrogates become U+FFFD). */
export function outString(s: string): void {
  outUTF16(changetype<usize>(s), s.length);
}

/** Appends a byte string holding the `units` UTF-16 code units at `ptr` in UTF-8. */
export function outUTF16(ptr: usize, units: i32): void {
  const p = outReserve(4 + <usize>units * 3);
  const w = String.UTF8.encodeUnsafe(ptr, units, p + 4, false, String.UTF8.ErrorMode.REPLACE);
  store<u32>(p, <u32>w);
  outLen += 4 + w;
}

/** The packed result (offset << 32 | length) of what was written. */
export function outPacked(): i64 {
  return (<i64>outPtr << 32) | <i64>outLen;
}

// ---- reader ------------------------------------------------------------------------------
//
// One reader over the buffer of the current call (module globals: plain integers, so the
// garbage collector has nothing to track). Reads past the end set rdBad and return 0.

export let rdPos: usize = 0;
export let rdEnd: usize = 0;
export let rdBad = false;

export function rdStart(ptr: usize, len: usize): void {
  rdPos = ptr;
  rdEnd = ptr + len;
  rdBad = false;
}

export function rdU32(): u32 {
  if (rdBad || rdEnd - rdPos < 4) { rdBad = true; return 0; }
  const v = load<u32>(rdPos);
  rdPos += 4;
  return v;
}

export function rdI64(): i64 {
  if (rdBad || rdEnd - rdPos < 8) { rdBad = true; return 0; }
  const v = load<i64>(rdPos);
  rdPos += 8;
  return v;
}

/** Reads a byte string's length and skips its bytes; returns the bytes' offset (rdLen holds
 *  the length). */
export let rdLen: usize = 0;
export function rdBytes(): usize {
  const n = <usize>rdU32();
  if (rdBad || rdEnd - rdPos < n) { rdBad = true; rdLen = 0; return 0; }
  const p = rdPos;
  rdPos += n;
  rdLen = n;
  return p;
}
