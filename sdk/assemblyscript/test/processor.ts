// A test processor (ABI v2) driven by its rows: each row {"do": OP, ...} runs one operation
// and emits what it read, so test-v2.mjs can check the SDK against a small state host.

import { JsonWriter, quote } from "../assembly/index";
import {
  StatefulProcessor, ProcessorHandle, Call, ValueState, ListState, MapState, registerProcessor, setStatePageBytes,
} from "../assembly/processor";
export * from "../assembly/exports-v2";

function out(c: Call, tag: string, v: string | null): void {
  c.emit(new JsonWriter().str("tag", tag).raw("v", v === null ? "null" : quote(v)).toString());
}

class Test extends StatefulProcessor {
  count!: ValueState;
  events!: ListState;
  seen!: MapState;
  inputs: Array<string> = [];

  init(h: ProcessorHandle): void {
    this.inputs = h.inputs;
    if (h.inputs.includes("refused")) { h.config.fail("inputs must not be named refused, got " + h.inputs.join(",")); return; }
    const page = h.config.getI64("page_bytes");
    if (page > 0) setStatePageBytes(<u32>page);
    if (h.config.getBool("bad_decl")) h.valueState("Bad-Name");
    this.count = h.valueState("count");
    this.events = h.listState("events", 60000);
    this.seen = h.mapState("seen");
  }

  handleInputRows(c: Call): void {
    for (let i = 0; i < c.rowCount; i++) {
      const r = c.rowObject(i);
      const op = r.getString("do")!;
      const a = r.getString("a"), b = r.getString("b");
      if (op == "value_get") out(c, "value", this.count.get());
      else if (op == "value_exists") out(c, "exists", this.count.exists().toString());
      else if (op == "value_set") this.count.update(a!);
      else if (op == "value_big") this.count.update("x".repeat(<i32>r.getI64("n")));
      else if (op == "value_len") out(c, "len", this.count.get()!.length.toString());
      else if (op == "value_clear") this.count.clear();
      else if (op == "list_append") this.events.append(a!);
      else if (op == "list_append2") this.events.appendAll([a!, b!]);
      else if (op == "list_put") this.events.put(r.getI64("n") == 0 ? [] : [a!, b!]);
      else if (op == "list_clear") this.events.clear();
      else if (op == "list_exists") out(c, "exists", this.events.exists().toString());
      else if (op == "list_all") { const it = this.events.iterator(); while (it.next()) out(c, "elem", it.value); }
      else if (op == "list_first") { const it = this.events.iterator(); if (it.next()) out(c, "elem", it.value); }
      else if (op == "map_set") this.seen.update(a!, b!);
      else if (op == "map_remove") this.seen.remove(a!);
      else if (op == "map_clear") this.seen.clear();
      else if (op == "map_exists") out(c, "exists", this.seen.exists().toString());
      else if (op == "map_contains") out(c, "contains", this.seen.containsKey(a!).toString());
      else if (op == "map_get") out(c, "value", this.seen.get(a!));
      else if (op == "map_all") { const it = this.seen.iterator(); while (it.next()) out(c, it.key, it.value); }
      else if (op == "timer_register") c.registerTimer(r.getI64("n"));
      else if (op == "timer_delete") c.deleteTimer(r.getI64("n"));
      else if (op == "timers") { const ts = c.listTimers(); for (let j = 0; j < ts.length; j++) out(c, "timer", ts[j].toString()); }
      else if (op == "times") { out(c, "T", c.currentProcessingTimeMs().toString()); out(c, "W", c.currentWatermarkMs().toString()); }
      else if (op == "clear_error") c.clearError();
      else if (op == "inputs") out(c, "inputs", this.inputs.join(","));
      else if (op == "input") out(c, "input", c.rowInput(i));
      else if (op == "fail") c.fail("asked to fail");
      else c.fail("unknown op " + op);
    }
  }

  // A timer call emits its timer; ts % 1000 == 1 deletes ts + 1 (later in the same group) and
  // registers it again; ts % 1000 == 7 fails.
  handleExpiredTimer(c: Call, ts: i64): void {
    out(c, "fired", ts.toString());
    if (ts % 1000 == 7) { c.fail("timer 7 fails"); return; }
    if (ts % 1000 == 1) { c.deleteTimer(ts + 1); c.registerTimer(ts + 1); return; }
    const v = this.count.get();
    if (v !== null) out(c, "count", v);
  }
}

registerProcessor(new Test());
