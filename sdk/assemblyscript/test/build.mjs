// Builds the test handler with each supported runtime (and a memory-limited variant).
import { execFileSync } from "node:child_process";
import { mkdirSync } from "node:fs";
const here = new URL(".", import.meta.url).pathname;
mkdirSync(here + "build", { recursive: true });
for (const rt of ["minimal", "incremental"]) {
  for (const [suffix, extra] of [["", []], ["-limited", ["--maximumMemory", "64"]]]) {
    execFileSync(here + "../node_modules/.bin/asc", [
      "handler.ts", "-o", `build/handler-${rt}${suffix}.wasm`, "--runtime", rt,
      "--exportStart", "_initialize", "--use", "abort=__gs_abort", "-O3", ...extra,
    ], { cwd: here, stdio: "inherit" });
  }
  // The ABI v2 test processor (test-v2.mjs).
  execFileSync(here + "../node_modules/.bin/asc", [
    "processor.ts", "-o", `build/processor-${rt}.wasm`, "--runtime", rt,
    "--exportStart", "_initialize", "--use", "abort=__gs_abort", "-O3",
  ], { cwd: here, stdio: "inherit" });
}
