// logincount, the running example of Spark's applyInPandasWithState: counts each user's
// logins and closes the session after config.idle_timeout of processing time without logins.
//
// Build (from the repository root; `make samples-assemblyscript` runs the same):
//
//   sdk/assemblyscript/node_modules/.bin/asc samples/logincount/assemblyscript/logincount.ts -o samples/logincount/assemblyscript/logincount.wasm --runtime minimal --exportStart _initialize --use abort=__gs_abort -O3

import { register, onInit, Config, Group, JsonWriter } from "../../../sdk/assemblyscript/assembly/index";
export * from "../../../sdk/assemblyscript/assembly/exports";

// config.idle_timeout in nanoseconds; 0 means no timeout.
let idleTimeoutNs: i64 = 0;

onInit((c: Config): void => {
  idleTimeoutNs = c.durationNs("idle_timeout");
});

register((g: Group): void => {
  const st = g.state;
  // State {"login_count": n}.
  let count: i64 = 0;
  const prev = st.getObject();
  if (prev !== null) count = prev.getI64("login_count");
  if (st.hasTimedOut()) {
    g.emit(new JsonWriter().raw("user_id", g.key.json).i64("total_logins", count).bool("session_closed", true));
    st.remove();
    return;
  }
  count += g.rowCount;
  if (st.update(new JsonWriter().i64("login_count", count).toString()) !== null) return;
  g.emit(new JsonWriter().raw("user_id", g.key.json).i64("total_logins", count));
  if (idleTimeoutNs > 0) st.setTimeoutDuration(idleTimeoutNs / 1000000);
});
