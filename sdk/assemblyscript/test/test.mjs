// Byte-level tests of the SDK against ABI v1 (abi/README.md), with a tiny host written here:
//
//   cd sdk/assemblyscript && npm test
import { readFileSync } from "node:fs";
import assert from "node:assert/strict";

const enc = new TextEncoder(), dec = new TextDecoder();
const runtime = process.argv[2] ?? "minimal";
const bytes = readFileSync(new URL(`./build/handler-${runtime}.wasm`, import.meta.url));
const limited = readFileSync(new URL(`./build/handler-${runtime}-limited.wasm`, import.meta.url));

function instance(wasm = bytes) {
  const h = { stderr: "", begun: [], logs: [] };
  const mem = () => new Uint8Array(h.exports.memory.buffer);
  const imports = {
    groupstate: {
      group_begin: i => h.begun.push(i),
      log: (level, p, n) => h.logs.push([level, dec.decode(mem().subarray(p, p + n))]),
    },
    wasi_snapshot_preview1: {
      fd_write(fd, iovs, n, written) {
        const dv = new DataView(h.exports.memory.buffer);
        let total = 0;
        for (let i = 0; i < n; i++) {
          const p = dv.getUint32(iovs + 8 * i, true), l = dv.getUint32(iovs + 8 * i + 4, true);
          if (fd === 2) h.stderr += dec.decode(mem().subarray(p, p + l));
          total += l;
        }
        dv.setUint32(written, total, true);
        return 0;
      },
    },
  };
  h.exports = new WebAssembly.Instance(new WebAssembly.Module(wasm), imports).exports;
  h.exports._initialize();
  assert.equal(h.exports.gs_abi_version(), 1);
  h.call = (fn, buf) => {
    const p = h.exports.gs_alloc(buf.length);
    assert.ok(p > 0, "gs_alloc returned 0");
    mem().set(buf, p);
    const r = BigInt.asUintN(64, h.exports[fn](p, buf.length));
    const ptr = Number(r >> 32n), len = Number(r & 0xffffffffn);
    return mem().slice(ptr, ptr + len);
  };
  return h;
}

class W {
  constructor() { this.b = []; }
  u32(v) { const a = new Uint8Array(4); new DataView(a.buffer).setUint32(0, v, true); this.b.push(a); return this; }
  i64(v) { const a = new Uint8Array(8); new DataView(a.buffer).setBigInt64(0, BigInt(v), true); this.b.push(a); return this; }
  str(s) { const e = typeof s === "string" ? enc.encode(s) : s; this.u32(e.length); this.b.push(e); return this; }
  done() { return Buffer.concat(this.b); }
}

class R {
  constructor(b) { this.b = b; this.dv = new DataView(b.buffer, b.byteOffset, b.length); this.p = 0; }
  u32() { const v = this.dv.getUint32(this.p, true); this.p += 4; return v; }
  i64() { const v = this.dv.getBigInt64(this.p, true); this.p += 8; return Number(v); }
  str() { const n = this.u32(); const s = dec.decode(this.b.subarray(this.p, this.p + n)); this.p += n; return s; }
}

const initBuf = ({ version = 1, mode = 0, flags = 0, name = "t", config = "{}" } = {}) =>
  new W().u32(version).u32(mode).u32(flags).str(name).str(config).done();

function init(h, opts) {
  const r = new R(h.call("gs_init", initBuf(opts)));
  const status = r.u32(), msg = r.str();
  assert.equal(r.p, r.b.length, "init result has trailing bytes");
  return { status, msg };
}

// groups: [{flags, key, state, rows: [objects or strings]}]
function processBuf(T, Wm, groups) {
  const w = new W().u32(groups.length).i64(T).i64(Wm);
  for (const g of groups) {
    w.u32(g.flags ?? 0).str(g.key ?? "\"k\"").str(g.state ?? "");
    const rows = g.rows ?? [];
    w.u32(rows.length);
    for (const r of rows) w.str(typeof r === "string" ? r : JSON.stringify(r));
  }
  return w.done();
}

function parseResult(b) {
  const r = new R(b);
  const status = r.u32();
  if (status === 1) {
    const msg = r.str();
    assert.equal(r.p, b.length);
    return { callError: msg };
  }
  assert.equal(status, 0);
  const n = r.u32(), groups = [];
  for (let i = 0; i < n; i++) {
    const emits = [];
    for (let k = r.u32(); k > 0; k--) emits.push(r.str());
    const g = { emits, status: r.u32(), action: r.u32(), flags: r.u32(), timeout: r.i64(), state: r.str(), error: r.str() };
    assert.ok(g.action <= 2);
    groups.push(g);
  }
  assert.equal(r.p, b.length, "result has trailing bytes");
  return { groups };
}

const run = (h, T, Wm, groups) => parseResult(h.call("gs_process", processBuf(T, Wm, groups)));
const ops = (...list) => list.map(o => (typeof o === "string" ? { do: o } : o));
const E = s => JSON.parse(s);
let passed = 0;
function test(name, fn) {
  try { fn(); passed++; } catch (e) { console.error(`FAIL ${name}\n${e.stack}`); process.exitCode = 1; }
}

test("init: ok and failures", () => {
  assert.deepEqual(init(instance()), { status: 0, msg: "" });
  assert.deepEqual(init(instance(), { version: 2 }), { status: 1, msg: "groupstate: host ABI version 2, module implements version 1" });
  assert.equal(init(instance(), { mode: 3 }).msg, "groupstate: unknown timeout mode 3");
  assert.match(init(instance(), { config: "[1]" }).msg, /config is not a JSON object/);
  assert.equal(init(instance(), { config: '{"fail_init": true}' }).msg, "init refused by config");
  assert.equal(init(instance(), { config: '{"bad_duration": "10 s"}' }).msg, 'groupstate: config bad_duration: time: invalid duration "10 s"');
  assert.match(init(instance(), { config: '{"bad_duration": true}' }).msg, /^groupstate: config bad_duration: want a duration string/);
  assert.equal(init(instance(), { config: '{"bad_duration": 10}' }).status, 0);
  const h = instance();
  const r = new R(h.call("gs_init", initBuf().subarray(0, 15)));
  assert.equal(r.u32(), 1);
  assert.equal(r.str(), "groupstate: init buffer malformed");
});

test("process before init, malformed, trailing bytes, zero groups", () => {
  const h = instance();
  assert.deepEqual(run(h, 1, 0, []), { callError: "groupstate: process called before a successful init" });
  assert.equal(init(h, { config: '{"fail_init": true}' }).status, 1);
  assert.deepEqual(run(h, 1, 0, []), { callError: "groupstate: process called before a successful init" });
  assert.equal(init(h).status, 0);
  assert.deepEqual(run(h, 1, 0, []), { groups: [] });
  const good = processBuf(1, 0, [{ rows: ops("key") }]);
  assert.match(parseResult(h.call("gs_process", good.subarray(0, good.length - 1))).callError, /malformed at group 0/);
  assert.match(parseResult(h.call("gs_process", Buffer.concat([good, Uint8Array.of(0)]))).callError, /trailing bytes/);
  assert.match(parseResult(h.call("gs_process", good.subarray(0, 10))).callError, /short header/);
  // And the instance still works.
  assert.deepEqual(run(h, 1, 0, [{ rows: ops("key") }]).groups[0].emits.map(E), [{ key: "k", value: "k", isString: true }]);
});

test("key raw and decoded, rows, group_begin", () => {
  const h = instance(); init(h);
  const row = '{"do":"row","x":"é\\u00e9 \\"q\\""}';
  const r = run(h, 1, 0, [
    { key: '"a\\"b\\\\c\\u0001é"', rows: ops("key") },
    { key: "-1.5e-07", rows: [ops("key")[0], row] },
  ]);
  assert.deepEqual(h.begun, [0, 1]);
  assert.deepEqual(E(r.groups[0].emits[0]), { key: "a\"b\\c\u0001é", value: "a\"b\\c\u0001é", isString: true });
  assert.deepEqual(E(r.groups[1].emits[0]), { key: -1.5e-07, value: "-1.5e-07", isString: false });
  assert.equal(r.groups[1].emits[1], row); // unchanged bytes
});

test("state handle: update, remove, get, getOption, action", () => {
  const h = instance(); init(h);
  const [a, b, c, d, e] = run(h, 1, 0, [
    { rows: ops("getOption", { do: "update", v: "{\"n\":1}" }, "getOption") },
    { flags: 2, state: "old", rows: ops("getOption", "remove", "getOption", "get", "clear", "remove") },
    { flags: 2, state: "old", rows: ops("remove", { do: "update", v: "" }, "getOption") },
    { flags: 2, state: "keep", rows: ops("get") },
    { rows: ops({ do: "update" }) },
  ]).groups;
  assert.deepEqual(a.emits.map(E), [{ v: null, exists: false }, { op: "update", err: null }, { v: "{\"n\":1}", exists: true }]);
  assert.deepEqual([a.status, a.action, a.state], [0, 1, "{\"n\":1}"]);
  assert.deepEqual(b.emits.map(E), [{ v: "old", exists: true }, { v: null, exists: false },
    { op: "get:", err: "groupstate: state is either not defined or has already been removed" },
    { op: "clear", err: "groupstate: state is either not defined or has already been removed" }]);
  assert.deepEqual([b.status, b.action, b.state], [0, 2, ""]);
  assert.deepEqual([c.status, c.action, c.state, c.emits[1]], [0, 1, "", '{"v":"","exists":true}']);
  assert.deepEqual([d.status, d.action, d.emits[0]], [0, 0, '{"op":"get:keep","err":null}']);
  // update(null) fails the group: no emits, neutral result.
  assert.deepEqual(e, { emits: [], status: 1, action: 0, flags: 0, timeout: 0, state: "", error: "groupstate: null is not a valid state value" });
});

test("timeouts per mode", () => {
  const none = instance(); init(none, { mode: 0 });
  assert.equal(run(none, 1000, 0, [{ rows: ops({ do: "dur", v: 5 }) }]).groups[0].error,
    "groupstate: cannot set timeout duration without processing_time timeout");
  assert.equal(run(none, 1000, 0, [{ rows: ops({ do: "ts", v: 5 }) }]).groups[0].error,
    "groupstate: cannot set timeout timestamp without event_time timeout");
  assert.equal(run(none, 1000, 0, [{ rows: ops("wm") }]).groups[0].error, "groupstate: no watermark is defined");

  const pt = instance(); init(pt, { mode: 1 });
  let [a, b, c, d] = run(pt, 1000, 0, [
    { rows: ops({ do: "dur", v: 5 }, { do: "dur", v: 7 }, "now") },
    { rows: ops({ do: "dur", v: 0 }) },
    { rows: ops({ do: "dur", v: 5 }, { do: "dur", v: -1 }, "clear") }, // a caught error changes nothing
    { rows: ops({ do: "dur", v: "9223372036854775807" }, "clear", "remove") },
  ]).groups;
  assert.deepEqual([a.status, a.flags, a.timeout, a.emits.at(-1)], [0, 1, 1007, '{"op":"now:1000","err":null}']);
  assert.deepEqual([b.status, b.error], [1, "groupstate: timeout duration must be positive"]);
  assert.deepEqual([c.status, c.flags, c.timeout, c.action], [0, 1, 1005, 0]);
  assert.deepEqual([d.status, d.flags, d.timeout, d.action], [0, 0, 0, 2]);

  const et = instance(); init(et, { mode: 2, flags: 1 });
  [a, b, c, d] = run(et, 1000, 500, [
    { rows: ops("wm", { do: "ts", v: 500 }, "remove") },
    { rows: ops({ do: "ts", v: 499 }) },
    { rows: ops({ do: "ts", v: 0 }) },
    { flags: 1, key: "7" },
  ]).groups;
  assert.deepEqual([a.status, a.flags, a.timeout, a.action, a.emits[0]], [0, 1, 500, 2, '{"op":"wm:500","err":null}']);
  assert.equal(b.error, "groupstate: timeout timestamp (499) cannot be earlier than the current watermark (500)");
  assert.equal(c.error, "groupstate: timeout timestamp must be positive");
  assert.deepEqual(d.emits.map(E), [{ key: 7, value: "7", timedOut: true, state: null }]);
  assert.deepEqual([d.status, d.action, d.flags], [0, 0, 0]);
});

test("fail keeps the first error; other groups proceed", () => {
  const h = instance(); init(h);
  const [a, b] = run(h, 1, 0, [
    { rows: ops("key", { do: "fail", v: "first" }, { do: "fail", v: "second" }) },
    { rows: ops("key") },
  ]).groups;
  assert.deepEqual([a.status, a.error, a.emits.length], [1, "first", 0]);
  assert.deepEqual([b.status, b.emits.length], [0, 1]);
});

test("throw traps with a line on stderr; log", () => {
  const h = instance(); init(h);
  run(h, 1, 0, [{ rows: ops("log") }]);
  assert.deepEqual(h.logs, [[4, "hello"]]);
  assert.throws(() => run(h, 1, 0, [{ rows: ops({ do: "throw", v: "up" }) }]), WebAssembly.RuntimeError);
  assert.match(h.stderr, /^abort: thrown up at handler\.ts:\d+:\d+\n$/);
});

test("json helper", () => {
  const h = instance(); init(h);
  const r = run(h, 1, 0, [{ rows: [
    { do: "field", o: { s: "a\\\"\n\u2028\ud83d\ude00", i: 12, f: 1.5, b: true, x: [1, { y: "}" }] } },
    { do: "field", o: { s: 1, i: 1.9e3, f: "x", x: null } },
    '{"do":"field","o":{"i":-9223372036854775808,"i":99999999999999999999,"x":"dup"}}',
    { do: "parse", v: "1h2m3.5s" }, { do: "parse", v: "-1.5us" }, { do: "parse", v: "0" }, { do: "parse", v: "1" },
    { do: "parse", v: "1970-01-01T00:00:50Z" }, { do: "parse", v: "2024-02-29T23:59:59.9999+01:30" },
    { do: "parse", v: "1969-12-31T23:59:59.5Z" }, { do: "parse", v: "2023-02-29T00:00:00Z" },
  ] }]).groups[0].emits.map(E);
  assert.deepEqual(r.slice(0, 3), [
    { s: "a\\\"\n\u2028\ud83d\ude00", i: 12, f: 1.5, b: true, kind: 6 },
    { s: null, i: 1900, f: -1, b: false, kind: 1 },
    { s: null, i: -1, f: -1, b: false, kind: 4 },
  ]);
  assert.deepEqual(r.slice(3), [
    { ns: 3723500000000, ms: null }, { ns: -1500, ms: null }, { ns: 0, ms: null }, { ns: null, ms: null },
    { ns: null, ms: 50000 }, { ns: null, ms: Date.parse("2024-02-29T23:59:59.999+01:30") },
    { ns: null, ms: -500 }, { ns: null, ms: null },
  ]);
});

test("memory: garbage is collected, input and output grow", () => {
  const h = instance(); init(h);
  const big = "y".repeat(200000);
  for (let i = 0; i < 200; i++) {
    const groups = [];
    for (let g = 0; g < 20; g++) groups.push({ rows: [{ do: "key", pad: big }, { do: "big", v: 1000 }] });
    const r = run(h, 1, 0, groups);
    assert.equal(r.groups.length, 20);
  }
  const mib = h.exports.memory.buffer.byteLength >> 20;
  assert.ok(mib < 64, `memory grew to ${mib} MiB`);
  const r = run(h, 1, 0, [{ rows: [{ do: "big", v: 3000000 }] }]);
  assert.equal(r.groups[0].emits[0].length, 3000002);
});

test("gs_alloc returns 0 (no trap) when memory cannot grow", () => {
  const h = instance(limited); init(h);
  assert.equal(h.exports.gs_alloc(8 << 20), 0);
  assert.equal(h.exports.gs_alloc(0), 0);
  assert.equal(h.exports.gs_alloc(-1), 0);
  assert.ok(h.exports.gs_alloc(100) > 0);
  assert.deepEqual(run(h, 1, 0, [{ rows: ops("key") }]).groups[0].status, 0);
});

console.log(`${runtime}: ${passed} tests passed`);
