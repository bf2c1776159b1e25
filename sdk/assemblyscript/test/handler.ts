// A test handler driven by its rows: each row {"do": OP, ...} runs one operation on the
// handle and emits what it returned, so test.mjs can check the SDK byte by byte.

import { register, onInit, Config, Group, JsonWriter, quote, parseDuration, parseRFC3339, log, LogLevel } from "../assembly/index";
export * from "../assembly/exports";

onInit((c: Config): void => {
  if (c.getBool("fail_init")) c.fail("init refused by config");
  c.durationMs("bad_duration");
});

function res(g: Group, op: string, err: string | null): void {
  g.emit(new JsonWriter().str("op", op).raw("err", err === null ? "null" : quote(err)).toString());
}

register((g: Group): void => {
  const st = g.state;
  if (st.hasTimedOut()) {
    g.emit(new JsonWriter().raw("key", g.key.json).str("value", g.key.value).bool("timedOut", true)
      .raw("state", st.exists() ? quote(st.get()) : "null").toString());
    return;
  }
  for (let i = 0; i < g.rowCount; i++) {
    const r = g.rowObject(i);
    const op = r.getString("do")!;
    if (op == "key") g.emit(new JsonWriter().raw("key", g.key.json).str("value", g.key.value).bool("isString", g.key.isString).toString());
    else if (op == "row") g.emitRow(i);
    else if (op == "get") { const v = st.get(); res(g, op + ":" + v, g.error); }
    else if (op == "getOption") { const v = st.getOption(); g.emit(new JsonWriter().raw("v", v === null ? "null" : quote(v)).bool("exists", st.exists()).toString()); }
    else if (op == "update") res(g, op, st.update(r.getString("v")));
    else if (op == "remove") st.remove();
    else if (op == "dur") res(g, op, st.setTimeoutDuration(r.getI64("v")));
    else if (op == "ts") res(g, op, st.setTimeoutTimestamp(r.getI64("v")));
    else if (op == "wm") { const w = st.currentWatermarkMs(); res(g, op + ":" + w.toString(), g.error); }
    else if (op == "now") res(g, op + ":" + st.currentProcessingTimeMs().toString(), null);
    else if (op == "clear") res(g, "clear", g.clearError());
    else if (op == "fail") g.fail(r.getString("v")!);
    else if (op == "throw") throw new Error("thrown " + r.getString("v")!);
    else if (op == "log") log(LogLevel.WARN, "hello");
    else if (op == "big") g.emit(quote("x".repeat(<i32>r.getI64("v"))));
    else if (op == "field") {
      const f = r.getObject("o")!;
      g.emit(new JsonWriter().raw("s", f.getString("s") === null ? "null" : quote(f.getString("s")!))
        .i64("i", f.getI64("i", -1)).f64("f", f.getF64("f", -1)).bool("b", f.getBool("b")).i64("kind", f.kind("x")).toString());
    }
    else if (op == "parse") {
      const d = parseDuration(r.getString("v")!);
      const t = parseRFC3339(r.getString("v")!);
      g.emit(new JsonWriter().raw("ns", d === null ? "null" : d.ns.toString()).raw("ms", t === null ? "null" : t.ms.toString()).toString());
    }
  }
});
