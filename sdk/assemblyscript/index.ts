// Package entry for `import { ... } from "groupstate-as"` (asc resolves node_modules/<pkg>/index.ts).
export * from "./assembly/index";
