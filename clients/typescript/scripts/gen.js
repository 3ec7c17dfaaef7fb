// Build step: copy the repository's protos into this package (proto/, read at run time by
// @grpc/proto-loader) and generate their TypeScript types (src/generated/), and copy the
// repository's LICENSE, which the npm package carries. None of these is committed: they
// come from the repository on every build (`npm pack` builds first: its prepack script).
"use strict";
const fs = require("node:fs");
const path = require("node:path");
const { execFileSync } = require("node:child_process");

const here = path.resolve(__dirname, "..");
const source = path.resolve(here, "../../protos");
const protoDir = path.join(here, "proto");
const outDir = path.join(here, "src", "generated");

fs.rmSync(protoDir, { recursive: true, force: true });
fs.rmSync(outDir, { recursive: true, force: true });
fs.cpSync(source, protoDir, { recursive: true });
fs.copyFileSync(path.resolve(here, "../../LICENSE"), path.join(here, "LICENSE"));

const files = [];
(function walk(dir) {
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) walk(full);
    else if (entry.name.endsWith(".proto")) files.push(path.relative(protoDir, full));
  }
})(protoDir);

// The same options src/protos.ts loads the protos with at run time.
execFileSync(process.execPath, [
  require.resolve("@grpc/proto-loader/build/bin/proto-loader-gen-types.js"),
  ...files.sort(),  // before --includeDirs, an array option that would swallow them
  "--longs=Number", "--enums=String", "--defaults", "--oneofs",
  "--grpcLib=@grpc/grpc-js", `--outDir=${outDir}`, `--includeDirs=${protoDir}`,
], { stdio: "inherit" });
