// Credentials against a real server that requires mutual TLS and knows bearer tokens
// (certificates from scripts/dev-certs): the client's certificate, its token, and the
// structured refusals when either is wrong or missing.
import { after, before, test } from "node:test";
import * as assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";

import { AuthError, Client, MorphzError, UnavailableError } from "../src";
import { credentialsFromEnv } from "../src/options";
import { REPO_ROOT, Server } from "./server";

const TOKEN = "alice-token-0123456789abcdef";
let certs: string;
let server: Server;

before(async () => {
  certs = fs.mkdtempSync(path.join(os.tmpdir(), "morphz-ts-certs-"));
  execFileSync(path.join(REPO_ROOT, "scripts", "dev-certs"), [certs, "alice"], { stdio: "ignore" });
  fs.writeFileSync(path.join(certs, "tokens.json"), JSON.stringify({ [TOKEN]: "alice" }));
  server = await Server.start({ args: [
    "--tls-cert", path.join(certs, "server.crt"), "--tls-key", path.join(certs, "server.key"),
    "--tls-client-ca", path.join(certs, "ca.crt"), "--tokens", path.join(certs, "tokens.json")] });
});

after(async () => {
  await server?.stop();
  fs.rmSync(certs, { recursive: true, force: true });
});

async function statusWith(env: Record<string, string>): Promise<unknown> {
  const mz = new Client(server.address, { credentials: credentialsFromEnv(env), retry: { attempts: 1 } });
  try {
    return await mz.createContext(`auth-${Math.random().toString(36).slice(2)}`);
  } catch (err) {
    return err;
  } finally {
    mz.close();
  }
}

test("sec_01_client_certificate_and_bearer_token_authenticate", async () => {
  const tls = {
    MORPHZ_TLS_CA: path.join(certs, "ca.crt"),
    MORPHZ_TLS_CERT: path.join(certs, "alice.crt"),
    MORPHZ_TLS_KEY: path.join(certs, "alice.key"),
  };
  const byCertificate = await statusWith(tls);
  assert.ok(!(byCertificate instanceof Error), String(byCertificate));
  const byToken = await statusWith({ ...tls, MORPHZ_TOKEN: TOKEN });
  assert.ok(!(byToken instanceof Error), String(byToken));

  const badToken = await statusWith({ ...tls, MORPHZ_TOKEN: "not-a-known-token-at-all" });
  assert.ok(badToken instanceof AuthError, String(badToken));
  assert.deepEqual([badToken.reason, badToken.code, badToken.details.credentials], ["UNAUTHENTICATED", "UNAUTHENTICATED", "token"]);

  // No client certificate: the TLS handshake itself refuses the connection.
  const noCertificate = await statusWith({ MORPHZ_TLS_CA: tls.MORPHZ_TLS_CA });
  assert.ok(noCertificate instanceof UnavailableError, String(noCertificate));
});

test("sec_03_unreadable_credentials_are_input_errors", () => {
  assert.throws(() => new Client(server.address, { credentials: { tlsCa: path.join(certs, "tokens.json") } }),
    (e: unknown) => e instanceof MorphzError && e.reason === "CONTEXT_INPUT_INVALID" && e.details.field === "tls_ca");
  assert.throws(() => new Client(server.address, { credentials: { tlsCa: path.join(certs, "ca.crt"), tlsCert: path.join(certs, "alice.crt") } }),
    (e: unknown) => e instanceof MorphzError && e.details.field === "tls_key");
});
