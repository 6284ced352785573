// Builds a JavaScript assignor module into a component of the kafka:streams-assignor world.
//
// Usage (from the repository root, which the component's module paths are made relative to):
//   node guest-sdk/js/componentize.mjs ENTRY.js OUT.wasm
//
// Every WASI feature is disabled, so the component imports only the world's own types: the
// runtime grants an assignor no stdio, clock, randomness or network, and refuses the HTTP
// imports StarlingMonkey's fetch would bring.

import { writeFile } from "node:fs/promises";
import { componentize } from "@bytecodealliance/componentize-js";

const [entry, out] = process.argv.slice(2);
if (!entry || !out) {
  console.error("usage: node guest-sdk/js/componentize.mjs ENTRY.js OUT.wasm");
  process.exit(2);
}
const { component } = await componentize({
  sourcePath: entry,
  witPath: "wit/v0.1.0",
  worldName: "assignor",
  disableFeatures: ["stdio", "random", "clocks", "http", "fetch-event"],
});
await writeFile(out, component);
