// Tests of the ABI v2 processor API (assembly/processor.ts, exports-v2.ts) against a small
// in-memory state host written here (abi/README.md section 9; no TTL, which is the host's):
//
//   cd sdk/assemblyscript && npm test
import { readFileSync } from "node:fs";
import assert from "node:assert/strict";

const enc = new TextEncoder(), dec = new TextDecoder();
const runtime = process.argv[2] ?? "minimal";
const wasm = readFileSync(new URL(`./build/processor-${runtime}.wasm`, import.meta.url));
const v1wasm = readFileSync(new URL(`./build/handler-${runtime}.wasm`, import.meta.url));

class W {
  constructor() { this.b = []; }
  u8(v) { this.b.push(Uint8Array.of(v)); return this; }
  u32(v) { const a = new Uint8Array(4); new DataView(a.buffer).setUint32(0, v, true); this.b.push(a); return this; }
  i64(v) { const a = new Uint8Array(8); new DataView(a.buffer).setBigInt64(0, BigInt(v), true); this.b.push(a); return this; }
  str(s) { const e = typeof s === "string" ? enc.encode(s) : s; this.u32(e.length); this.b.push(e); return this; }
  done() { return Buffer.concat(this.b); }
}
class R {
  constructor(b) { this.b = b; this.dv = new DataView(b.buffer, b.byteOffset, b.length); this.p = 0; }
  u8() { return this.b[this.p++]; }
  u32() { const v = this.dv.getUint32(this.p, true); this.p += 4; return v; }
  i64() { const v = this.dv.getBigInt64(this.p, true); this.p += 8; return Number(v); }
  raw() { const n = this.u32(); const s = this.b.subarray(this.p, this.p + n); this.p += n; return s; }
  str() { return dec.decode(this.raw()); }
  get end() { return this.p >= this.b.length; }
}

const KINDS = { 1: "value", 2: "list", 3: "map" };
const READS = new Set([0x01, 0x10, 0x14, 0x20, 0x21, 0x24, 0x26, 0x32]);
const clone = ks => ({ vals: new Map(ks.vals), lists: new Map([...ks.lists].map(([k, l]) => [k, [...l]])),
  maps: new Map([...ks.maps].map(([k, m]) => [k, new Map(m)])), timers: new Set(ks.timers) });
const empty = () => ({ vals: new Map(), lists: new Map(), maps: new Map(), timers: new Set() });

// The host: committed state per key, each group's pending state, the state import.
function start(mode = 1, bytes = wasm) {
  const h = { mode, keys: new Map(), reqs: [], refuse: 0, cur: -1, groups: [], firing: [], work: [] };
  const mem = () => new Uint8Array(h.exports.memory.buffer);
  const imports = {
    groupstate: {
      group_begin: i => {
        h.cur = i;
        h.work[i] = clone(h.keys.get(h.groups[i]) ?? empty());
        for (const ts of h.firing[i]) h.work[i].timers.delete(ts);
      },
      log: () => {},
      state: (rp, rl, ap, cap) => {
        const req = mem().slice(rp, rp + rl);
        h.reqs.push(req);
        if (h.cur < 0) return -1;
        const ans = h.apply(h.work[h.cur], req, true);
        if (ans === null) return -1;
        if (ans.length <= cap) mem().set(ans, ap);
        return ans.length;
      },
    },
    wasi_snapshot_preview1: { fd_write: () => 0 },
  };
  h.exports = new WebAssembly.Instance(new WebAssembly.Module(bytes), imports).exports;
  h.exports._initialize();
  h.call = (fn, buf) => {
    const p = h.exports.gs_alloc(buf.length);
    mem().set(buf, p);
    const r = BigInt.asUintN(64, h.exports[fn](p, buf.length));
    const ptr = Number(r >> 32n), len = Number(r & 0xffffffffn);
    return mem().slice(ptr, ptr + len);
  };
  h.apply = (ks, req, readsOK) => {
    const r = new R(req), w = new W();
    while (!r.end) {
      const op = r.u8();
      if (op === h.refuse || (READS.has(op) && !readsOK)) return null;
      if (op >= 0x30) {
        if (h.mode === 0) return null;
        if (op === 0x30) ks.timers.add(r.i64());
        else if (op === 0x31) ks.timers.delete(r.i64());
        else { const ts = [...ks.timers].sort((a, b) => a - b); w.u32(ts.length); ts.forEach(t => w.i64(t)); }
        continue;
      }
      const v = r.u32(), d = h.decls[v];
      if (!d || KINDS[d.kind] !== ["value", "list", "map"][(op >> 4)]) return null;
      const list = ks.lists.get(v) ?? [], map = ks.maps.get(v) ?? new Map();
      switch (op) {
        case 0x01: if (ks.vals.has(v)) w.u8(1).str(ks.vals.get(v)); else w.u8(0); break;
        case 0x02: ks.vals.set(v, r.raw().slice()); break;
        case 0x03: ks.vals.delete(v); break;
        case 0x10: {
          const cursor = r.i64(), max = r.u32(), page = [];
          let size = 0, next = 0;
          for (let i = cursor; i < list.length; i++) {
            if (page.length && size + 4 + list[i].length > max) { next = i; break; }
            page.push(list[i]); size += 4 + list[i].length;
          }
          w.u32(page.length); page.forEach(e => w.str(e)); w.i64(next);
          break;
        }
        case 0x11: case 0x12: {
          const n = r.u32(), els = [];
          for (let i = 0; i < n; i++) els.push(r.raw().slice());
          ks.lists.set(v, op === 0x12 ? els : list.concat(els));
          break;
        }
        case 0x13: ks.lists.delete(v); break;
        case 0x14: w.u8(list.length ? 1 : 0); break;
        case 0x20: { const k = r.str(); if (map.has(k)) w.u8(1).str(map.get(k)); else w.u8(0); break; }
        case 0x21: w.u8(map.has(r.str()) ? 1 : 0); break;
        case 0x22: { const k = r.str(); map.set(k, r.raw().slice()); ks.maps.set(v, map); break; }
        case 0x23: map.delete(r.str()); break;
        case 0x24: {
          const cursor = r.str(), max = r.u32();
          const keys = [...map.keys()].sort((a, b) => Buffer.compare(enc.encode(a), enc.encode(b))).filter(k => Buffer.compare(enc.encode(k), enc.encode(cursor)) >= 0);
          const page = [];
          let size = 0, next = "";
          for (const k of keys) {
            const n = 8 + enc.encode(k).length + map.get(k).length;
            if (page.length && size + n > max) { next = k; break; }
            page.push(k); size += n;
          }
          w.u32(page.length); page.forEach(k => w.str(k).str(map.get(k))); w.u8(next ? 1 : 0).str(next);
          break;
        }
        case 0x25: ks.maps.delete(v); break;
        case 0x26: w.u8(map.size ? 1 : 0); break;
        default: return null;
      }
    }
    return w.done();
  };
  return h;
}

function init(h, { version = 2, config = "{}", flags = 1, inputs = null, buf = null } = {}) {
  let b = buf;
  if (b === null) {
    const w = new W().u32(version).u32(h.mode).u32(flags).str("t").str(config);
    if (inputs !== null) { w.u32(inputs.length); inputs.forEach(n => w.str(n)); }
    b = w.done();
  }
  const r = new R(h.call("gs_init", b));
  const status = r.u32(), msg = r.str();
  if (status !== 0) return { status, msg };
  h.decls = [];
  for (let n = r.u32(); n > 0; n--) h.decls.push({ name: r.str(), kind: r.u32(), ttl: r.i64() });
  assert.ok(r.end, "init result has trailing bytes");
  return { status, msg, decls: h.decls };
}

// groups: [{kind: 0|1|2, key, rows | timers | initial}], a DATA group's rows with their input
// indexes in `inputs` (a deployment with inputs); commits the groups that succeeded.
function run(h, T, groups) {
  const w = new W().u32(groups.length).i64(T).i64(500);
  h.groups = groups.map(g => g.key ?? '"k"');
  h.firing = groups.map(g => g.timers ?? []);
  h.cur = -1;
  h.work = [];
  for (const g of groups) {
    w.u32(g.kind ?? 0).str(g.key ?? '"k"');
    if (g.timers) { w.u32(g.timers.length); g.timers.forEach(t => w.i64(t)); }
    else if (g.initial !== undefined) w.str(g.initial);
    else {
      w.u32(g.rows.length);
      g.rows.forEach((r, i) => { if (g.inputs) w.u32(g.inputs[i]); w.str(typeof r === "string" ? r : JSON.stringify(r)); });
    }
  }
  const r = new R(h.call("gs_process", w.done()));
  if (r.u32() === 1) return { callError: r.str() };
  const out = [];
  const n = r.u32();
  for (let i = 0; i < n; i++) {
    const emits = [];
    for (let k = r.u32(); k > 0; k--) emits.push(JSON.parse(r.str()));
    const g = { emits, status: r.u32(), error: r.str(), ops: r.raw().slice() };
    if (g.status === 0) {
      assert.notEqual(h.apply(h.work[i], g.ops, false), null, "result ops refused");
      h.keys.set(h.groups[i], h.work[i]);
    }
    out.push(g);
  }
  assert.ok(r.end);
  return out;
}
const rows = (h, ...rs) => run(h, 1000, [{ rows: rs.map(x => (typeof x === "string" ? { do: x } : x)) }])[0];
const dump = (h, key = '"k"') => {
  const ks = h.keys.get(key);
  if (!ks) return "";
  const parts = [];
  h.decls.forEach((d, v) => {
    if (d.kind === 1 && ks.vals.has(v)) parts.push(`${d.name}=${dec.decode(ks.vals.get(v))}`);
    if (d.kind === 2 && ks.lists.get(v)?.length) parts.push(`${d.name}=[${ks.lists.get(v).map(e => dec.decode(e)).join(" ")}]`);
    if (d.kind === 3 && ks.maps.get(v)?.size) parts.push(`${d.name}={${[...ks.maps.get(v)].sort().map(([k, e]) => `${k}:${dec.decode(e)}`).join(",")}}`);
  });
  if (ks.timers.size) parts.push(`timers=[${[...ks.timers].sort((a, b) => a - b).join(" ")}]`);
  return parts.join(" ");
};
const E = (tag, v) => ({ tag, v });
const countOps = (h, op) => h.reqs.filter(q => q.includes(op)).length;

let passed = 0;
function test(name, fn) {
  try { fn(); passed++; } catch (e) { console.error(`FAIL ${name}\n${e.stack}`); process.exitCode = 1; }
}

test("module shape: v2 imports groupstate.state, v1 does not", () => {
  const names = m => WebAssembly.Module.imports(new WebAssembly.Module(m)).map(i => `${i.module}.${i.name}`);
  assert.ok(names(wasm).includes("groupstate.state"));
  assert.ok(!names(v1wasm).includes("groupstate.state"));
  for (const s of ["logincount", "sessions"]) {
    const b = readFileSync(new URL(`../../../samples/${s}/assemblyscript/${s}.wasm`, import.meta.url));
    assert.ok(!names(b).includes("groupstate.state"), s);
  }
  assert.equal(start().exports.gs_abi_version(), 2);
});

test("init: declarations and failures", () => {
  assert.deepEqual(init(start()).decls, [{ name: "count", kind: 1, ttl: 0 }, { name: "events", kind: 2, ttl: 60000 }, { name: "seen", kind: 3, ttl: 0 }]);
  assert.equal(init(start(), { version: 1 }).msg, "groupstate: host ABI version 1, module implements version 2");
  assert.equal(init(start(), { config: '{"bad_decl": true}' }).msg, 'groupstate: valueState("Bad-Name"): a name starts with a letter a-z');
});

test("values: writes go with the next read", () => {
  const h = start(); init(h);
  const g = rows(h, "value_get", "value_exists", { do: "value_set", a: "41" }, { do: "value_set", a: "42" }, "value_get", "times");
  assert.equal(g.error, "");
  assert.deepEqual(g.emits, [E("value", null), E("exists", "false"), E("value", "42"), E("T", "1000"), E("W", "500")]);
  assert.equal(g.ops.length, 0);
  assert.equal(h.reqs.length, 3);
  assert.equal(h.reqs[2][0], 0x02);
  assert.equal(dump(h), "count=42");
  const g2 = rows(h, "value_clear", { do: "value_set", a: "7" });
  assert.deepEqual([...g2.ops], [0x03, 0, 0, 0, 0, 0x02, 0, 0, 0, 0, 1, 0, 0, 0, 0x37]);
  assert.equal(dump(h), "count=7");
});

test("a big answer is asked for again, reads only", () => {
  const h = start(); init(h);
  const g = rows(h, { do: "list_append", a: "e1" }, { do: "value_big", n: 200000 }, "value_len");
  assert.deepEqual([g.error, g.emits], ["", [E("len", "200000")]]);
  assert.equal(h.reqs.length, 2);
  assert.equal(h.reqs[0][0], 0x11);
  assert.deepEqual([...h.reqs[1]], [0x01, 0, 0, 0, 0]);
  assert.equal(dump(h), `count=${"x".repeat(200000)} events=[e1]`);
});

test("lists: paging, stopping early, put, clear", () => {
  const h = start(); init(h, { config: '{"page_bytes": 16}' });
  let g = rows(h, "list_exists", { do: "list_append", a: "one" }, { do: "list_append2", a: "two", b: "three" }, "list_exists", "list_all");
  assert.deepEqual(g.emits, [E("exists", "false"), E("exists", "true"), E("elem", "one"), E("elem", "two"), E("elem", "three")]);
  assert.equal(h.reqs.filter(q => q[q.length - 17] === 0x10).length, 2);
  h.reqs = [];
  g = rows(h, "list_first");
  assert.deepEqual([g.emits, h.reqs.length], [[E("elem", "one")], 1]);
  g = rows(h, { do: "list_put", a: "x", b: "y", n: 2 }, "list_all", "list_clear", { do: "list_append", a: "z" });
  assert.deepEqual(g.emits, [E("elem", "x"), E("elem", "y")]);
  assert.equal(dump(h), "events=[z]");
  g = rows(h, { do: "list_put", n: 0 }, "list_exists");
  assert.deepEqual(g.emits, [E("exists", "false")]);
});

test("maps: get, contains, remove, ordered paged iteration, clear", () => {
  const h = start(); init(h, { config: '{"page_bytes": 20}' });
  const g = rows(h, "map_exists", { do: "map_set", a: "b", b: "2" }, { do: "map_set", a: "a", b: "1" }, { do: "map_set", a: "c", b: "3" },
    { do: "map_get", a: "a" }, { do: "map_get", a: "zz" }, { do: "map_contains", a: "c" }, { do: "map_remove", a: "c" },
    { do: "map_contains", a: "c" }, { do: "map_set", a: "d", b: "4" }, "map_exists", "map_all");
  assert.deepEqual(g.emits, [E("exists", "false"), E("value", "1"), E("value", null), E("contains", "true"), E("contains", "false"),
    E("exists", "true"), E("a", "1"), E("b", "2"), E("d", "4")]);
  assert.equal(dump(h), "seen={a:1,b:2,d:4}");
  assert.deepEqual(rows(h, "map_clear", "map_all").emits, []);
  assert.equal(dump(h), "");
});

test("timers: list, fire in order, skip a deleted one, a failing timer fails the group", () => {
  const h = start(); init(h);
  let g = rows(h, ...[1001, 1002, 1003, 1003, 5000].map(n => ({ do: "timer_register", n })), { do: "timer_delete", n: 5000 },
    { do: "value_set", a: "9" }, "timers");
  assert.deepEqual(g.emits, [E("timer", "1001"), E("timer", "1002"), E("timer", "1003")]);
  g = run(h, 2000, [{ kind: 1, timers: [1001, 1002, 1003] }])[0];
  assert.deepEqual([g.error, g.emits], ["", [E("fired", "1001"), E("fired", "1003"), E("count", "9")]]);
  assert.equal(dump(h), "count=9 timers=[1002]");
  rows(h, { do: "timer_register", n: 2007 }, { do: "timer_register", n: 2008 });
  g = run(h, 3000, [{ kind: 1, timers: [1002, 2007, 2008] }])[0];
  assert.deepEqual([g.error, g.emits], ["timer 7 fails", []]);
  assert.equal(dump(h), "count=9 timers=[1002 2007 2008]");
  const none = start(0); init(none);
  g = rows(none, "timers", { do: "timer_register", n: 5 });
  assert.equal(g.error, "groupstate: timers need timeout processing_time or event_time in the deployment spec");
});

test("failures: a refused request fails the call; a failed call keeps nothing; malformed buffers", () => {
  const h = start(); init(h);
  h.refuse = 0x21;
  let g = rows(h, { do: "value_set", a: "1" }, { do: "map_contains", a: "x" }, "clear_error", "value_get");
  assert.deepEqual([g.error, g.emits, g.ops.length], ["groupstate: the host refused a state request (see the host's log)", [], 0]);
  assert.equal(dump(h), "");
  h.refuse = 0;
  g = rows(h, { do: "value_set", a: "1" }, "fail");
  assert.deepEqual([g.error, g.ops.length, dump(h)], ["asked to fail", 0, ""]);
  assert.match(run(h, 1, [{ rows: [{ do: "times" }] }, { kind: 1, timers: [1] }]).callError, /group 1: groups of different kinds/);
  assert.match(run(h, 1, [{ kind: 1, timers: [2, 1] }]).callError, /timers out of order/);
  assert.match(run(h, 1, [{ rows: [] }]).callError, /a DATA group without rows/);
});

test("initial state: the default", () => {
  const h = start(); init(h);
  const [a, b, c] = run(h, 1000, [
    { kind: 2, key: '"a"', initial: '{"count": {"n": 5}, "events": [1, {"e": "x y"}], "seen": {"k\\u0031": 1, "k2": [2]}}' },
    { kind: 2, key: '"b"', initial: '{"count": null, "nope": 1, "other": 2}' },
    { kind: 2, key: '"c"', initial: '{"events": [1, null]}' },
  ]);
  assert.equal(a.error, "");
  assert.equal(dump(h, '"a"'), 'count={"n":5} events=[1 {"e":"x y"}] seen={k1:1,k2:[2]}');
  assert.equal(b.error, 'groupstate: initial state names undeclared state variables ["nope" "other"] (declared: count, events, seen)');
  assert.match(c.error, /initial state of events: an element is null/);
});

test("inputs: the names at init, refused by the processor", () => {
  const HAS_INPUTS = 2;
  let h = start(); init(h, { flags: 1 | HAS_INPUTS, inputs: ["impressions", "clicks"] });
  let [g] = run(h, 1000, [{ rows: [{ do: "inputs" }], inputs: [0] }]);
  assert.deepEqual([g.error, g.emits], ["", [E("inputs", "impressions,clicks")]]);
  h = start(); init(h);
  assert.deepEqual(rows(h, "inputs").emits, [E("inputs", "")]);
  assert.equal(init(start(), { flags: HAS_INPUTS, inputs: ["a", "refused"] }).msg, "inputs must not be named refused, got a,refused");
});

test("inputs: unknown init flags and malformed names fail the init", () => {
  const refused = f => `groupstate: host sets init flags ${f} this SDK does not implement (rebuild with a newer SDK)`;
  const base = (flags) => new W().u32(2).u32(1).u32(flags).str("t").str("{}");
  for (const [name, opts, want] of [
    ["unknown flag", { flags: 1 | 4 }, refused("0x4")],
    ["unknown flags with inputs", { flags: 2 | 0x30, inputs: ["a"] }, refused("0x30")],
    ["high flag", { flags: 0x80000000 }, refused("0x80000000")],
    ["no names", { flags: 2, inputs: [] }, "groupstate: init buffer malformed: input_count 0 (want 1 to 16)"],
    ["17 inputs", { flags: 2, inputs: [..."abcdefghijklmnopq"] }, "groupstate: init buffer malformed: input_count 17 (want 1 to 16)"],
    ["an empty name", { flags: 2, inputs: ["a", ""] }, "groupstate: init buffer malformed: input 1: name is empty"],
    ["a long name", { flags: 2, inputs: ["a".repeat(33)] }, "groupstate: init buffer malformed: input 0: name is longer than 32 bytes"],
    ["a name with a capital", { flags: 2, inputs: ["Clicks"] }, "groupstate: init buffer malformed: input 0: name does not start with a letter a-z"],
    ["a name with a dot", { flags: 2, inputs: ["a_b-c.d"] }, "groupstate: init buffer malformed: input 0: name has a byte other than a-z, 0-9, _ and - at offset 5"],
    ["a name not UTF-8", { flags: 2, inputs: [Uint8Array.of(0x61, 0xff)] }, "groupstate: init buffer malformed: input 0: name has a byte other than a-z, 0-9, _ and - at offset 1"],
    ["a name twice", { flags: 2, inputs: ["a", "b", "a"] }, 'groupstate: init buffer malformed: input 2: name "a" already used by input 0'],
    ["a name truncated", { buf: base(2).u32(1).u32(5).done().subarray(0, 30) }, "groupstate: init buffer malformed"],
    ["trailing bytes", { buf: base(2).u32(1).str("a").u8(0).done() }, "groupstate: init buffer malformed"],
    ["names without the flag", { buf: base(0).u32(1).str("a").done() }, "groupstate: init buffer malformed"],
    ["version 1 with an unknown flag", { version: 1, flags: 4 }, "groupstate: host ABI version 1, module implements version 2"],
  ]) {
    const h = start();
    const r = init(h, opts);
    assert.deepEqual([r.status, r.msg], [1, want], name);
    // A failed init leaves no processor.
    assert.match(run(h, 1, [{ rows: [{ do: "times" }] }]).callError, /before a successful init/, name);
  }
});

test("inputs: each row's input, in the buffer's order; none without inputs", () => {
  const h = start(); init(h, { flags: 3, inputs: ["impressions", "clicks"] });
  const [a, b] = run(h, 1000, [
    { key: '"ad1"', rows: [{ do: "input" }, { do: "input" }, { do: "input" }], inputs: [1, 0, 1] },
    { key: "7", rows: [{ do: "input" }], inputs: [0] },
  ]);
  assert.deepEqual([a.error, a.emits], ["", [E("input", "clicks"), E("input", "impressions"), E("input", "clicks")]]);
  assert.deepEqual([b.error, b.emits], ["", [E("input", "impressions")]]);
  assert.deepEqual(run(h, 2000, [{ kind: 1, timers: [5] }])[0].error, "");
  const one = start(); init(one);
  assert.deepEqual(rows(one, "input").emits, [E("input", "")]);
});

test("inputs: an input index out of range is a malformed buffer", () => {
  const h = start(); init(h, { flags: 2, inputs: ["impressions", "clicks"] });
  assert.equal(run(h, 1, [{ rows: [{ do: "times" }], inputs: [0] }, { key: '"b"', rows: [{ do: "times" }, { do: "times" }], inputs: [1, 2] }]).callError,
    "groupstate: process buffer malformed at group 1: row 1: input index 2 out of range (the deployment has 2 inputs)");
  assert.equal(run(h, 1, [{ rows: [{ do: "times" }], inputs: [0xffffffff] }]).callError,
    "groupstate: process buffer malformed at group 0: row 0: input index 4294967295 out of range (the deployment has 2 inputs)");
  assert.equal(run(h, 1, [{ rows: ["x"] }]).callError, "groupstate: process buffer malformed at group 0: short"); // no index
});

console.log(`${runtime} (v2): ${passed} tests passed`);
