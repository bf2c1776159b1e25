// Checks a built handler module against the ABI import/export rules (abi/README.md section 2;
// section 9.1 for a v2 module, the only kind that may import groupstate.state):
//
//   node sdk/assemblyscript/check-module.mjs samples/logincount/assemblyscript/logincount.wasm
//
// Prints its imports and exports; exits 1 on a problem.
import { readFileSync } from "node:fs";

const want = {
  gs_abi_version: "function", gs_alloc: "function", gs_init: "function", gs_process: "function", memory: "memory",
};
const allowedHost = new Set(["group_begin", "log"]);
let bad = 0;
for (const file of process.argv.slice(2)) {
  const m = new WebAssembly.Module(readFileSync(file));
  const imports = WebAssembly.Module.imports(m);
  const exports = WebAssembly.Module.exports(m);
  console.log(`${file}:`);
  console.log("  imports: " + (imports.map(i => `${i.module}.${i.name} (${i.kind})`).join(", ") || "none"));
  console.log("  exports: " + exports.map(e => `${e.name} (${e.kind})`).join(", "));
  const problem = msg => { console.log("  PROBLEM: " + msg); bad++; };
  // gs_abi_version must not depend on initialization: call it on an instance that did not run _initialize.
  const stub = {};
  for (const i of imports) (stub[i.module] ??= {})[i.name] = () => 0;
  const v = new WebAssembly.Instance(m, stub).exports.gs_abi_version();
  console.log(`  gs_abi_version() = ${v}`);
  if (v !== 1 && v !== 2) problem(`gs_abi_version returned ${v}, want 1 or 2`);
  for (const i of imports) {
    if (i.kind !== "function") problem(`imports ${i.module}.${i.name}: a ${i.kind}`);
    else if (i.module === "groupstate" && i.name === "state" && v !== 2) problem("a v1 module imports groupstate.state");
    else if (i.module === "groupstate" ? !allowedHost.has(i.name) && i.name !== "state" : i.module !== "wasi_snapshot_preview1") {
      problem(`imports ${i.module}.${i.name}: only "wasi_snapshot_preview1" and "groupstate" imports are allowed`);
    }
  }
  for (const [name, kind] of Object.entries(want)) {
    if (!exports.some(e => e.name === name && e.kind === kind)) problem(`missing export "${name}" (${kind})`);
  }
}
process.exit(bad ? 1 : 0);
