// groupstate handler SDK for AssemblyScript, ABI v1 (abi/README.md).
//
//   import { register, Group } from "groupstate-as";
//   export * from "groupstate-as/assembly/exports";   // the module's ABI exports
//
//   function handle(g: Group): void { ... }
//   register(handle);

import { setHandler, addInitHook, currentConfig } from "./registry";
import { Group } from "./group";
import { Config } from "./config";

export { Group, GroupState, Key, TimeoutMode } from "./group";
export { Config } from "./config";
export { JsonObject, JsonWriter, JsonKind, quote } from "./json";
export { Duration, parseDuration, Timestamp, parseRFC3339 } from "./time";
export { log, LogLevel } from "./log";

/** Registers the handler: called once per group (key) and call. Call it from the module's
 *  top-level code. A later call replaces the handler. */
export function register(fn: (g: Group) => void): void {
  setHandler(fn);
}

/** Adds an init hook, run in gs_init in registration order with the deployment's config;
 *  a hook that calls c.fail(message) refuses the module. Call it from top-level code. */
export function onInit(fn: (c: Config) => void): void {
  addInitHook(fn);
}

/** The config of a successful init (null before). */
export function config(): Config | null {
  return currentConfig();
}
