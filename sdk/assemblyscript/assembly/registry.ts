// What the module's top-level code registers (it runs in _initialize, before gs_init).

import { Config } from "./config";
import { Group } from "./group";

let handlerFn: ((g: Group) => void) | null = null;
const hooks = new Array<(c: Config) => void>();
let cfg: Config | null = null;

export function setHandler(fn: (g: Group) => void): void { handlerFn = fn; }
export function handler(): ((g: Group) => void) | null { return handlerFn; }
export function addInitHook(fn: (c: Config) => void): void { hooks.push(fn); }
export function initHooks(): Array<(c: Config) => void> { return hooks; }
export function setConfig(c: Config | null): void { cfg = c; }
export function currentConfig(): Config | null { return cfg; }
