// The ABI v1 exports. A handler's entry file re-exports them:
//
//   export * from "groupstate-as/assembly/exports";
//
// and is compiled with --runtime minimal --exportStart _initialize --use abort=__gs_abort
// (see docs/handlers/assemblyscript.md).

import "./abort";
import {
  inputBuffer, outReset, outU32, outI64, outString, outPatchU32, outPacked, outLen, outTruncate,
  rdStart, rdU32, rdI64, rdBytes, rdLen, rdPos, rdEnd, rdBad,
} from "./buffer";
import { Config } from "./config";
import { Group, TimeoutMode, Action } from "./group";
import { JsonObject } from "./json";

import { handler, initHooks, setConfig, currentConfig } from "./registry";

// The ABI version this SDK implements.
const ABI_VERSION: u32 = 1;

@external("groupstate", "group_begin")
declare function group_begin(index: i32): void;

// ---- exports -----------------------------------------------------------------------------

export function gs_abi_version(): i32 {
  return ABI_VERSION;
}

export function gs_alloc(size: i32): usize {
  return size <= 0 ? 0 : inputBuffer(<usize>size);
}

export function gs_init(ptr: usize, len: i32): i64 {
  outReset();
  setConfig(null);
  rdStart(ptr, <usize><u32>len);
  const version = rdU32();
  const mode = rdU32();
  const flags = rdU32();
  const namePtr = rdBytes(), nameLen = rdLen;
  const configPtr = rdBytes(), configLen = rdLen;
  let err: string | null = null;
  if (rdBad || rdPos != rdEnd) {
    err = "groupstate: init buffer malformed";
  } else if (version != ABI_VERSION) {
    err = "groupstate: host ABI version " + version.toString() + ", module implements version " + ABI_VERSION.toString();
  } else if (mode > 2) {
    err = "groupstate: unknown timeout mode " + mode.toString();
  } else if (handler() === null) {
    err = "groupstate: no handler registered (call register(fn) in the module's top-level code)";
  } else {
    const json = String.UTF8.decodeUnsafe(configPtr, configLen);
    const obj = JsonObject.parse(json);
    if (obj === null) {
      err = "groupstate: config is not a JSON object: " + json;
    } else {
      const c = new Config(String.UTF8.decodeUnsafe(namePtr, nameLen), <TimeoutMode>mode, (flags & 1) != 0, json, obj);
      const hooks = initHooks();
      for (let i = 0; i < hooks.length && c.err === null; i++) hooks[i](c);
      err = c.err;
      if (err === null) setConfig(c);
    }
  }
  if (err !== null) {
    outU32(1);
    outString(err);
  } else {
    outU32(0);
    outU32(0);
  }
  return outPacked();
}

// Garbage is collected between groups once this many input bytes were consumed since the
// last collection (and always at the start of a call).
const COLLECT_EVERY: usize = 1 << 20;

// Row offsets of the current group: (offset, length) pairs, reused across groups.
const rowsAt = new Array<usize>();

// The minimal runtime never collects by itself: collect where no managed reference lives on
// the wasm stack, that is at the start of gs_process and between groups (runGroup has
// returned). The incremental runtime collects on its own. The stub runtime never frees.
// @ts-ignore: builtin
const MINIMAL = ASC_RUNTIME == 1;
// @ts-ignore: builtin
if (ASC_RUNTIME == 0) ERROR("groupstate: --runtime stub never frees memory; build with --runtime minimal or incremental");

export function gs_process(ptr: usize, len: i32): i64 {
  if (MINIMAL) __collect();
  outReset();
  const c = currentConfig();
  if (c === null) return callError("groupstate: process called before a successful init");
  const mode = c.timeoutMode, hasWatermark = c.hasWatermark;
  rdStart(ptr, <usize><u32>len);
  const count = rdU32();
  const T = rdI64();
  const W = rdI64();
  if (rdBad) return callError("groupstate: process buffer malformed: short header");
  outU32(0);
  outU32(count);
  let sinceCollect: usize = 0;
  for (let i: u32 = 0; i < count; i++) {
    const start = rdPos;
    const flags = rdU32();
    const keyPtr = rdBytes(), keyLen = rdLen;
    const statePtr = rdBytes(), stateLen = rdLen;
    const n = rdU32();
    rowsAt.length = 0;
    for (let j: u32 = 0; j < n && !rdBad; j++) {
      const p = rdBytes();
      rowsAt.push(p);
      rowsAt.push(rdLen);
    }
    if (rdBad) return callError("groupstate: process buffer malformed at group " + i.toString());
    if (MINIMAL && sinceCollect >= COLLECT_EVERY) {
      __collect();
      sinceCollect = 0;
    }
    sinceCollect += rdPos - start;
    runGroup(<i32>i, flags, keyPtr, keyLen, statePtr, stateLen, T, W, mode, hasWatermark);
  }
  if (rdPos != rdEnd) return callError("groupstate: process buffer malformed: trailing bytes");
  return outPacked();
}

// The one Group the handler sees, reset for every group.
const current = new Group(rowsAt);

function runGroup(
  i: i32, flags: u32, keyPtr: usize, keyLen: usize, statePtr: usize, stateLen: usize,
  T: i64, W: i64, mode: TimeoutMode, hasWatermark: bool,
): void {
  group_begin(i);
  const g = current;
  g.reset(i, keyPtr, keyLen);
  const st = g.state;
  st.reset((flags & 2) != 0, statePtr, stateLen, (flags & 1) != 0, T, W, mode, hasWatermark);
  const emitsAt = outLen;
  outU32(0);
  handler()!(g);
  const err = g.err;
  if (err !== null) {
    // Failed: drop the emits (the host ignores them) and write a neutral result.
    outTruncate(emitsAt);
    outU32(0);
    outU32(1);
    outU32(Action.KEEP);
    outU32(0);
    outI64(0);
    outU32(0);
    outString(err);
    return;
  }
  outPatchU32(emitsAt, g.emitted);
  outU32(0);
  outU32(st.action);
  outU32(st.timeoutSet ? 1 : 0);
  outI64(st.timeoutSet ? st.timeoutMs : 0);
  if (st.action == Action.UPDATE) outString(st.value!);
  else outU32(0);
  outU32(0);
}

// A whole-call error (ABI 4.5) replacing anything written so far.
function callError(message: string): i64 {
  outReset();
  outU32(1);
  outString(message);
  return outPacked();
}
