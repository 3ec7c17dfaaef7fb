// The README's TypeScript example runs as printed against a real server, as a program
// importing this package by its name (the example holds no type annotations, so it runs
// as an ES module as it stands).
import { after, before, test } from "node:test";
import * as assert from "node:assert/strict";
import { execFile } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";

import { Server } from "./server";

const PACKAGE = path.resolve(__dirname, "..", "..");
const README = path.resolve(PACKAGE, "..", "..", "README.md");

let server: Server;

before(async () => {
  server = await Server.start();
});

after(async () => {
  await server?.stop();
});

test("readme_typescript_example_runs_as_printed", async () => {
  const section = fs.readFileSync(README, "utf8").split("\n## TypeScript\n")[1].split("\n## ")[0];
  const block = /```ts\n([\s\S]*?)```/.exec(section)![1];
  const file = path.join(PACKAGE, "dist", "test", "readme-example.mjs");  // inside the package: its name resolves
  fs.writeFileSync(file, block);
  const stdout = await new Promise<string>((resolve, reject) =>
    execFile(process.execPath, [file], { env: { ...process.env, MORPHZ_SERVER: server.address }, timeout: 60_000 },
      (err, out, errOut) => (err ? reject(new Error(`${err.message}\n${out}\n${errOut}`)) : resolve(out))));
  assert.match(stdout, /^\(protocol/);
  assert.match(stdout, /^1 \[ \[ 'create', 'release', 'created' \] \]$/m);
  assert.match(stdout, /^TX_CONFLICT \[ 'frame:release'/m);
});
