// Credentials against a real server that requires mutual TLS and knows bearer tokens
// (certificates from scripts/dev-certs): the client's certificate, its token, and the
// structured refusals when either is wrong or missing.
import { after, before, test } from "node:test";
import * as assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";

import { AuthError, Client, MorphzError, Tx, UnavailableError } from "../src";
import { credentialsFromEnv } from "../src/options";
import { REPO_ROOT, Server } from "./server";

const TOKEN = "alice-token-0123456789abcdef";
const BOB_TOKEN = "bob-token-0123456789abcdef0";
let certs: string;
let server: Server;

before(async () => {
  certs = fs.mkdtempSync(path.join(os.tmpdir(), "morphz-ts-certs-"));
  execFileSync(path.join(REPO_ROOT, "scripts", "dev-certs"), [certs, "alice"], { stdio: "ignore" });
  fs.writeFileSync(path.join(certs, "tokens.json"), JSON.stringify({ [TOKEN]: "alice", [BOB_TOKEN]: "bob" }));
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

function clientAs(token: string): Client {
  return new Client(server.address, { retry: { attempts: 1 }, credentials: {
    tlsCa: path.join(certs, "ca.crt"), tlsCert: path.join(certs, "alice.crt"), tlsKey: path.join(certs, "alice.key"), token } });
}

async function refusal(call: Promise<unknown>): Promise<MorphzError> {
  const outcome = await call.then((v) => v, (e: unknown) => e);
  assert.ok(outcome instanceof MorphzError, `expected a refusal, got ${JSON.stringify(outcome)}`);
  return outcome;
}

test("sec_01_sec_04_grants_revokes_and_secrets_through_the_client", async () => {
  const alice = clientAs(TOKEN);
  const bob = clientAs(BOB_TOKEN);
  const context = `policy-${Math.random().toString(36).slice(2)}`;
  try {
    await alice.createContext(context);  // its creator is its admin
    const appended = await alice.appendEvent(context, { session: "s1", kind: "user-message", text: "the vault code is 4711", secret: true });
    await alice.commit(context, new Tx(0).create("creds", "(note (secret \"hunter2\"))"));

    // Redacted unless asked; revealed for a principal holding `reveal` (the admin does).
    const redacted = await alice.event(context, appended.ref);
    assert.equal(redacted.text, `[secret ${appended.ref}]`);
    assert.equal((await alice.event(context, appended.ref, { revealSecrets: true })).text, "the vault code is 4711");
    assert.ok(!(await alice.frame(context, "creds")).body.includes("hunter2"));
    assert.ok((await alice.frames(context, { revealSecrets: true })).frames[0].body.includes("hunter2"));
    // What the model sees: redacted unless the compile's scope reveals (SEC-04).
    const enc = await alice.compile(context, { session: "s1" });
    // The secrets' words, not bare digits: "4711" can be part of a timestamp's microseconds.
    assert.ok(!enc.text.includes("vault code") && !enc.text.includes("hunter2"), enc.text);
    assert.ok(enc.text.includes(`[secret ${appended.ref}]`), enc.text);
    const revealed = await alice.compile(context, { session: "s1", activation: enc.activation, scope: { revealSecrets: true } });
    assert.ok(revealed.text.includes("the vault code is 4711") && revealed.text.includes("hunter2"), revealed.text);

    // Another principal sees nothing until granted, and is not told what exists.
    const denied = await refusal(bob.event(context, appended.ref));
    assert.ok(denied instanceof AuthError);
    assert.equal(denied.reason, "FORBIDDEN");
    assert.ok(!(await bob.contexts()).includes(context));

    let policy = await alice.grant(context, "bob", ["read"]);
    assert.ok(policy.eventRef.startsWith("@e"));
    assert.ok(policy.grants.some((g) => g.principal === "bob" && g.right === "read" && g.session === ""));
    assert.ok((await bob.contexts()).includes(context));
    assert.equal((await bob.event(context, appended.ref)).text, `[secret ${appended.ref}]`);
    // Asking to reveal without the right is refused, never silently redacted.
    assert.equal((await refusal(bob.event(context, appended.ref, { revealSecrets: true }))).reason, "FORBIDDEN");
    // Nor may a reader change the policy.
    assert.equal((await refusal(bob.grant(context, "bob", ["admin"]))).reason, "FORBIDDEN");

    await alice.grant(context, "bob", ["reveal"]);
    assert.equal((await bob.event(context, appended.ref, { revealSecrets: true })).text, "the vault code is 4711");

    policy = await alice.revoke(context, "bob", ["read", "reveal"]);
    assert.ok(!policy.grants.some((g) => g.principal === "bob"));
    assert.deepEqual((await alice.policy(context)).grants, policy.grants);
    assert.equal((await refusal(bob.event(context, appended.ref))).reason, "FORBIDDEN");
  } finally {
    alice.close();
    bob.close();
  }
});
