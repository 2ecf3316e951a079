// Removes build outputs (`node scripts/clean.mjs dist build`), so that no stale file of a removed module is
// packed or tested.
import { rmSync } from "node:fs";

for (const dir of process.argv.slice(2)) rmSync(dir, { recursive: true, force: true });
