// The ABI v2 exports (abi/README.md section 9), for a module that registers a processor
// (assembly/processor.ts). Its entry file re-exports them instead of assembly/exports:
//
//   export * from "groupstate-as/assembly/exports-v2";
//
// compiled with the same flags as a v1 module (docs/handlers/assemblyscript.md).

import "./abort";
import {
  inputBuffer, outReset, outU32, outString, outPatchU32, outPacked, outLen, outTruncate, outBytes,
  rdStart, rdU32, rdI64, rdBytes, rdLen, rdPos, rdEnd, rdBad,
} from "./buffer";
import { Config } from "./config";
import { TimeoutMode } from "./group";
import { JsonObject } from "./json";
import { handler, initHooks, setConfig, currentConfig } from "./registry";
import {
  Call, ProcessorHandle, processor, decls, declErr, setDeclaring, setCurrent, opsReset, opsStart, opsLen,
  inputNames, GROUP_DATA, GROUP_TIMERS, GROUP_INITIAL,
} from "./processor";

const ABI_VERSION: u32 = 2;

// Init flags (abi/README.md 4.1): HAS_WATERMARK, HAS_INPUTS (the input names follow the config,
// and each row of a DATA group starts with the index of its input). A v2 module fails its init
// when the host sets a flag it does not implement.
const INIT_HAS_WATERMARK: u32 = 1;
const INIT_HAS_INPUTS: u32 = 2;
const INIT_KNOWN_FLAGS: u32 = INIT_HAS_WATERMARK | INIT_HAS_INPUTS;
const MAX_INPUTS: u32 = 16;
const MAX_INPUT_NAME_LEN: usize = 32;

// What is wrong with the input name at ptr (abi/README.md 9.3a: 1-32 bytes of [a-z0-9_-]
// starting with a letter), or null.
function inputNameProblem(ptr: usize, len: usize): string | null {
  if (len == 0) return "is empty";
  if (len > MAX_INPUT_NAME_LEN) return "is longer than 32 bytes";
  const c0 = load<u8>(ptr);
  if (c0 < 0x61 || c0 > 0x7a) return "does not start with a letter a-z";
  for (let i: usize = 0; i < len; i++) {
    const c = load<u8>(ptr + i);
    if (!((c >= 0x61 && c <= 0x7a) || (c >= 0x30 && c <= 0x39) || c == 0x5f || c == 0x2d)) {
      return "has a byte other than a-z, 0-9, _ and - at offset " + i.toString();
    }
  }
  return null;
}

@external("groupstate", "group_begin")
declare function group_begin(index: i32): void;

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
  let namePtr: usize = 0, nameLen: usize = 0, configPtr: usize = 0, configLen: usize = 0;
  let badInputs: string | null = null; // what is wrong with the input names
  inputNames.length = 0;
  // What follows the config is read only with flags this SDK knows: with another, it may be
  // laid out as the SDK does not know.
  if (!rdBad && version == ABI_VERSION && (flags & ~INIT_KNOWN_FLAGS) == 0) {
    namePtr = rdBytes(); nameLen = rdLen;
    configPtr = rdBytes(); configLen = rdLen;
    if ((flags & INIT_HAS_INPUTS) != 0) {
      const n = rdU32();
      if (!rdBad && (n == 0 || n > MAX_INPUTS)) badInputs = "input_count " + n.toString() + " (want 1 to 16)";
      for (let i: u32 = 0; i < n && !rdBad && badInputs === null; i++) {
        const p = rdBytes();
        if (rdBad) break;
        const why = inputNameProblem(p, rdLen);
        if (why !== null) { badInputs = "input " + i.toString() + ": name " + why; break; }
        const name = String.UTF8.decodeUnsafe(p, rdLen);
        const j = inputNames.indexOf(name);
        if (j >= 0) { badInputs = "input " + i.toString() + ": name \"" + name + "\" already used by input " + j.toString(); break; }
        inputNames.push(name);
      }
    }
  }
  let err: string | null = null;
  const p = processor();
  if (badInputs !== null) {
    err = "groupstate: init buffer malformed: " + badInputs;
  } else if (rdBad) {
    err = "groupstate: init buffer malformed";
  } else if (version != ABI_VERSION) {
    err = "groupstate: host ABI version " + version.toString() + ", module implements version " + ABI_VERSION.toString();
  } else if ((flags & ~INIT_KNOWN_FLAGS) != 0) {
    err = "groupstate: host sets init flags 0x" + (flags & ~INIT_KNOWN_FLAGS).toString(16) + " this SDK does not implement (rebuild with a newer SDK)";
  } else if (rdPos != rdEnd) {
    err = "groupstate: init buffer malformed";
  } else if (mode > 2) {
    err = "groupstate: unknown timeout mode " + mode.toString();
  } else if (p === null) {
    err = "groupstate: no processor registered (call registerProcessor(p) in the module's top-level code)";
  } else if (handler() !== null) {
    err = "groupstate: a module registers a handler (register) or a processor (registerProcessor), not both";
  } else {
    const json = String.UTF8.decodeUnsafe(configPtr, configLen);
    const obj = JsonObject.parse(json);
    if (obj === null) {
      err = "groupstate: config is not a JSON object: " + json;
    } else {
      const c = new Config(String.UTF8.decodeUnsafe(namePtr, nameLen), <TimeoutMode>mode, (flags & INIT_HAS_WATERMARK) != 0, json, obj);
      const hooks = initHooks();
      for (let i = 0; i < hooks.length && c.err === null; i++) hooks[i](c);
      err = c.err;
      if (err === null) {
        setDeclaring(true);
        p.init(new ProcessorHandle(c, inputNames.slice()));
        setDeclaring(false);
        err = c.err !== null ? c.err : declErr;
      }
      if (err === null) setConfig(c);
    }
  }
  if (err !== null) {
    inputNames.length = 0;
    outU32(1);
    outString(err);
    return outPacked();
  }
  outU32(0);
  outU32(0);
  outU32(<u32>decls.length);
  for (let i = 0; i < decls.length; i++) {
    const d = decls[i];
    outString(d.name);
    outU32(d.kind);
    outU32(<u32>d.ttlMs);
    outU32(<u32>(d.ttlMs >>> 32));
  }
  return outPacked();
}

const COLLECT_EVERY: usize = 1 << 20;
const rowsAt = new Array<usize>();
const rowInputs = new Array<u32>(); // with inputs: the index of each row's input
// @ts-ignore: builtin
const MINIMAL = ASC_RUNTIME == 1;
// @ts-ignore: builtin
if (ASC_RUNTIME == 0) ERROR("groupstate: --runtime stub never frees memory; build with --runtime minimal or incremental");

export function gs_process(ptr: usize, len: i32): i64 {
  if (MINIMAL) __collect();
  outReset();
  const c = currentConfig();
  if (c === null) return callError("groupstate: process called before a successful init");
  rdStart(ptr, <usize><u32>len);
  const count = rdU32();
  const T = rdI64();
  const W = rdI64();
  if (rdBad) return callError("groupstate: process buffer malformed: short header");
  outU32(0);
  outU32(count);
  let sinceCollect: usize = 0;
  let firstKind: u32 = 0;
  for (let i: u32 = 0; i < count; i++) {
    const start = rdPos;
    const kind = rdU32();
    const keyPtr = rdBytes(), keyLen = rdLen;
    if (rdBad) return malformed(i, "short");
    if (kind > GROUP_INITIAL) return malformed(i, "unknown kind " + kind.toString());
    if (i == 0) firstKind = kind;
    else if (kind != firstKind) return malformed(i, "groups of different kinds");
    rowsAt.length = 0;
    rowInputs.length = 0;
    let timersPtr: usize = 0, timerCount: u32 = 0, initialPtr: usize = 0, initialLen: usize = 0;
    if (kind == GROUP_DATA) {
      const n = rdU32();
      const inputs = <u32>inputNames.length;
      for (let j: u32 = 0; j < n && !rdBad; j++) {
        if (inputs > 0) {
          const input = rdU32();
          if (!rdBad && input >= inputs) {
            return malformed(i, "row " + j.toString() + ": input index " + input.toString() + " out of range (the deployment has " + inputs.toString() + " inputs)");
          }
          rowInputs.push(input);
        }
        const p = rdBytes();
        rowsAt.push(p);
        rowsAt.push(rdLen);
      }
      if (!rdBad && n == 0) return malformed(i, "a DATA group without rows");
    } else if (kind == GROUP_TIMERS) {
      timerCount = rdU32();
      timersPtr = rdPos;
      for (let j: u32 = 0; j < timerCount && !rdBad; j++) {
        const ts = rdI64();
        if (j > 0 && ts <= load<i64>(rdPos - 16)) return malformed(i, "timers out of order");
      }
      if (!rdBad && timerCount == 0) return malformed(i, "a TIMERS group without timers");
    } else {
      initialPtr = rdBytes();
      initialLen = rdLen;
    }
    if (rdBad) return malformed(i, "short");
    if (MINIMAL && sinceCollect >= COLLECT_EVERY) {
      __collect();
      sinceCollect = 0;
    }
    sinceCollect += rdPos - start;
    runGroup(<i32>i, kind, keyPtr, keyLen, timersPtr, timerCount, initialPtr, initialLen, T, W, c.timeoutMode, c.hasWatermark);
  }
  if (rdPos != rdEnd) return callError("groupstate: process buffer malformed: trailing bytes");
  return outPacked();
}

const current = new Call(rowsAt, rowInputs);

function runGroup(
  i: i32, kind: u32, keyPtr: usize, keyLen: usize, timersPtr: usize, timerCount: u32,
  initialPtr: usize, initialLen: usize, T: i64, W: i64, mode: TimeoutMode, hasWatermark: bool,
): void {
  group_begin(i);
  const g = current;
  g.index = i;
  g.key.reset(keyPtr, keyLen);
  g.emitted = 0;
  g.err = null;
  g.fatal = null;
  g.kind = kind;
  g.T = T;
  g.W = W;
  g.mode = mode;
  g.hasWatermark = hasWatermark;
  g.timersPtr = timersPtr;
  g.timerCount = <i32>timerCount;
  g.timerIdx = -1;
  opsReset();
  const emitsAt = outLen;
  outU32(0);
  const p = processor()!;
  setCurrent(g);
  if (kind == GROUP_DATA) {
    p.handleInputRows(g);
  } else if (kind == GROUP_TIMERS) {
    g.skip = new StaticArray<bool>(<i32>timerCount);
    for (let j = 0; j < <i32>timerCount && g.error === null; j++) {
      if (g.skip[j]) continue;
      g.timerIdx = j;
      p.handleExpiredTimer(g, load<i64>(timersPtr + (<usize>j << 3)));
    }
  } else {
    const initial = JsonObject.parseBytes(null, initialPtr, initialLen);
    if (initial === null) g.fail("groupstate: initial state is not a JSON object of state variables: " + String.UTF8.decodeUnsafe(initialPtr, initialLen));
    else p.handleInitialState(g, initial);
  }
  setCurrent(null);
  const err = g.error;
  if (err !== null) {
    // Failed: no emits, the message, no ops (the host discards the group's writes).
    outTruncate(emitsAt);
    outU32(0);
    outU32(1);
    outString(err);
    outU32(0);
  } else {
    outPatchU32(emitsAt, g.emitted);
    outU32(0);
    outU32(0);
    outBytes(opsStart(), opsLen);
  }
  opsReset();
}

function malformed(i: u32, why: string): i64 {
  return callError("groupstate: process buffer malformed at group " + i.toString() + ": " + why);
}

function callError(message: string): i64 {
  outReset();
  outU32(1);
  outString(message);
  return outPacked();
}
