// A real `morphz serve` (all-in-one) child process on a temporary data folder, on a free
// loopback port it picks itself (read from its "morphz: serving on ADDRESS" line).
// MORPHZ_BIN names the command; default: the repository's .venv/bin/morphz.
import { ChildProcess, spawn } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import * as readline from "node:readline";

const REPO = path.resolve(__dirname, "..", "..", "..", "..");
const START_BOUND_MS = 60_000;

export const REPO_ROOT = REPO;

export function morphzBin(): string {
  return process.env.MORPHZ_BIN || path.join(REPO, ".venv", "bin", "morphz");
}

export interface ServerOptions {
  /** Also serve the internal storage API (tests read raw event records through it). */
  storageListen?: boolean;
  /** More `morphz serve` flags (authentication, say). */
  args?: string[];
  env?: Record<string, string>;
}

export class Server {
  address = "";
  storageAddress = "";
  private proc: ChildProcess | undefined;
  private exited: Promise<number | null> = Promise.resolve(null);

  private constructor(readonly dataDir: string, private readonly options: ServerOptions) {}

  static async start(options: ServerOptions = {}): Promise<Server> {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "morphz-ts-"));
    const server = new Server(dataDir, options);
    await server.launch("127.0.0.1:0", options.env ?? {});
    return server;
  }

  /** Start it again on the same data and port (after a kill), with `env` this time. */
  restart(env: Record<string, string> = {}): Promise<void> {
    return this.launch(this.address, env);
  }

  private launch(listen: string, env: Record<string, string>): Promise<void> {
    const args = ["serve", "--listen", listen, "--data", path.join(this.dataDir, "data")];
    if (this.options.storageListen) args.push("--storage-listen", "127.0.0.1:0");
    args.push(...(this.options.args ?? []));
    const log = fs.openSync(path.join(this.dataDir, "stderr.log"), "a");
    const proc = spawn(morphzBin(), args, {
      env: { ...process.env, PYTHONUNBUFFERED: "1", ...env },
      stdio: ["ignore", "pipe", log],
    });
    fs.closeSync(log);
    this.proc = proc;
    this.exited = new Promise((resolve) => proc.once("exit", (code) => resolve(code)));
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => fail("no 'serving on' line in time"), START_BOUND_MS);
      const lines = readline.createInterface({ input: proc.stdout! });
      const fail = (why: string) => {
        clearTimeout(timer);
        lines.close();
        reject(new Error(`morphz serve (${morphzBin()}): ${why}\n${this.stderr()}`));
      };
      const early = (code: number | null) => fail(`exited ${code} before serving`);
      proc.once("error", (err) => fail(err.message));
      proc.once("exit", early);
      lines.once("line", (line) => {
        clearTimeout(timer);
        proc.removeListener("exit", early);
        if (!line.startsWith("morphz: serving on ")) return fail(`unexpected first line ${JSON.stringify(line)}`);
        const words = line.split(" ");
        this.address = words[3];
        this.storageAddress = words.find((w) => w.startsWith("storage="))?.slice("storage=".length) ?? "";
        resolve();
      });
    });
  }

  /** Resolves with the exit code once the process has ended (a crash included). */
  exit(): Promise<number | null> {
    return this.exited;
  }

  stderr(): string {
    try {
      return fs.readFileSync(path.join(this.dataDir, "stderr.log"), "utf8");
    } catch {
      return "";
    }
  }

  async kill(): Promise<void> {
    if (this.proc && this.proc.exitCode === null && this.proc.signalCode === null) this.proc.kill("SIGKILL");
    await this.exited;
  }

  /** End it and remove its data folder. SIGKILL: the data is thrown away, and a clean
   * stop (covered by the Python suite) takes seconds the tests need not wait. */
  async stop(): Promise<void> {
    await this.kill();
    fs.rmSync(this.dataDir, { recursive: true, force: true });
  }
}
