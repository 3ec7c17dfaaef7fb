// Connection options: where the services are and the credentials presented, read from
// the same $MORPHZ_* variables as the CLI and the Python client.
import * as fs from "node:fs";
import * as grpc from "@grpc/grpc-js";

import { inputError } from "./errors";

export const DEFAULT_SERVER = "127.0.0.1:7070";  // `morphz serve`'s default listen address
// A restarted server is found again within about a second (gRPC's own reconnect backoff
// grows to two minutes).
export const CHANNEL_OPTIONS: grpc.ChannelOptions = {
  "grpc.initial_reconnect_backoff_ms": 200,
  "grpc.min_reconnect_backoff_ms": 200,
  "grpc.max_reconnect_backoff_ms": 1000,
  "grpc.max_receive_message_length": 64 * 1024 * 1024,
};

/** TLS (verifying the server with `tlsCa`, else the system roots), a client certificate
 * for mutual TLS (`tlsCert` + `tlsKey`), and/or a bearer token sent as
 * `authorization: Bearer TOKEN`. PEM values are file paths or the PEM bytes. Nothing
 * set: plaintext (a development server on loopback). */
export interface Credentials {
  tlsCa?: string | Buffer;
  tlsCert?: string | Buffer;
  tlsKey?: string | Buffer;
  token?: string;
  tls?: boolean;
}

export function credentialsFromEnv(env: NodeJS.ProcessEnv = process.env): Credentials {
  return {
    tlsCa: env.MORPHZ_TLS_CA || undefined,
    tlsCert: env.MORPHZ_TLS_CERT || undefined,
    tlsKey: env.MORPHZ_TLS_KEY || undefined,
    token: env.MORPHZ_TOKEN ?? "",
  };
}

function pem(value: string | Buffer | undefined, name: string): Buffer | null {
  if (value === undefined) return null;
  if (Buffer.isBuffer(value)) return value;
  if (value.includes("-----BEGIN ")) return Buffer.from(value, "ascii"); // PEM text: never echoed
  const path = value.length <= 200 ? value : value.slice(0, 199) + "…";
  let data: Buffer;
  try {
    data = fs.readFileSync(value);
  } catch (e) {
    throw inputError(`cannot read ${path}: ${(e as Error).message}`, { field: name, path });
  }
  if (!data.includes("-----BEGIN ")) throw inputError(`${path} is not a PEM file`, { field: name, path });
  return data;
}

export function channelCredentials(c: Credentials): grpc.ChannelCredentials {
  if (!(c.tls || c.tlsCa || c.tlsCert)) return grpc.credentials.createInsecure();
  if (Boolean(c.tlsCert) !== Boolean(c.tlsKey)) {
    throw inputError("tlsCert and tlsKey go together", { field: c.tlsCert ? "tls_key" : "tls_cert" });
  }
  return grpc.credentials.createSsl(pem(c.tlsCa, "tls_ca"), pem(c.tlsKey, "tls_key"), pem(c.tlsCert, "tls_cert"));
}

/** As the CLI: the address given, else $MORPHZ_<SERVICE> (a split deployment), else
 * $MORPHZ_SERVER, else the all-in-one server's default address. */
export function targetFor(service: string, given?: string, env: NodeJS.ProcessEnv = process.env): string {
  return given || env[`MORPHZ_${service.toUpperCase()}`] || env.MORPHZ_SERVER || DEFAULT_SERVER;
}
