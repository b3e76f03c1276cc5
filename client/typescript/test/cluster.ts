// A real three-node batond cluster with TLS, built from this tree
// (bin/batond, or $BATOND), as client/python/tests/conftest.py starts it:
// `batond certs`, three processes on free ports below the ephemeral range,
// each polled until /readyz answers, then a leader.

import { spawn, execFileSync, type ChildProcess } from "node:child_process";
import { mkdtempSync, openSync, readFileSync, existsSync, closeSync, rmSync } from "node:fs";
import { randomBytes, randomUUID } from "node:crypto";
import * as https from "node:https";
import * as net from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = resolve(fileURLToPath(import.meta.url), "../../../..");
export const BATOND = process.env["BATOND"] ?? join(ROOT, "bin", "batond");
const FAST = ["--heartbeat-timeout=300ms", "--election-timeout=300ms", "--leader-lease-timeout=150ms", "--commit-timeout=20ms"];

export interface ClusterOptions {
  /** More batond flags for every node. */
  extraArgs?: string[];
  /** The client certificate the harness's own probes present (a cluster started with --client-ca-file). */
  probeCert?: { cert: Buffer; key: Buffer };
}

export interface ClusterInfo {
  endpoints: string[];
  token: string;
  ca: string;
  base: string;
  pids: number[];
}

/** Polls cond until it returns something truthy, or throws after timeoutMs. */
export async function waitFor<T>(cond: () => Promise<T> | T, what: string, timeoutMs = 20_000, everyMs = 50): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  while (Date.now() < deadline) {
    try {
      const v = await cond();
      if (v) return v;
    } catch (e) {
      last = e;
    }
    await new Promise((r) => setTimeout(r, everyMs));
  }
  throw new Error(`timed out after ${timeoutMs}ms waiting for ${what} (last error: ${String(last)})`);
}

function ephemeralLow(): number {
  try {
    return Number(readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").split(/\s+/)[0]) || 32768;
  } catch {
    return 32768;
  }
}

function bindable(port: number): Promise<boolean> {
  return new Promise((res) => {
    const s = net.createServer();
    s.once("error", () => res(false));
    s.listen(port, "127.0.0.1", () => s.close(() => res(true)));
  });
}

/** n free ports below the kernel's ephemeral range (no outgoing connection takes one). */
export async function freePorts(n: number): Promise<number[]> {
  const lo = 10000;
  const hi = ephemeralLow();
  const out: number[] = [];
  while (out.length < n) {
    const p = lo + Math.floor(Math.random() * (hi - lo));
    if (!out.includes(p) && (await bindable(p))) out.push(p);
  }
  return out;
}

export class Cluster {
  readonly ids: string[];
  readonly token = "admin-" + randomBytes(8).toString("hex");
  readonly base: string;
  readonly tls: string;
  readonly ca: string;
  http: number[] = [];
  raft: number[] = [];
  procs: (ChildProcess | undefined)[];
  private agent: https.Agent | undefined;

  constructor(nodes = 3, private readonly opts: ClusterOptions = {}) {
    this.ids = Array.from({ length: nodes }, (_, i) => `n${i + 1}`);
    this.base = mkdtempSync(join(tmpdir(), "baton-ts-"));
    this.tls = join(this.base, "tls");
    this.ca = join(this.tls, "ca.pem");
    this.procs = new Array<ChildProcess | undefined>(nodes).fill(undefined);
  }

  get endpoints(): string[] {
    return this.http.map((p) => `127.0.0.1:${p}`);
  }

  info(): ClusterInfo {
    return { endpoints: this.endpoints, token: this.token, ca: this.ca, base: this.base, pids: this.procs.map((p) => p?.pid ?? 0) };
  }

  async start(): Promise<void> {
    if (!existsSync(BATOND)) throw new Error(`${BATOND} is missing: run make build`);
    const ports = await freePorts(2 * this.ids.length);
    this.http = ports.slice(0, this.ids.length);
    this.raft = ports.slice(this.ids.length);
    execFileSync(BATOND, ["certs", "--out", this.tls, "--nodes", this.ids.join(",")], { stdio: "pipe" });
    this.agent = new https.Agent({ ca: readFileSync(this.ca), keepAlive: false, ...this.opts.probeCert });
    for (let i = 0; i < this.ids.length; i++) this.startNode(i);
    await this.waitReady();
    await this.leader();
  }

  startNode(i: number): void {
    const id = this.ids[i]!;
    const peers = this.ids.map((n, j) => `${n}=127.0.0.1:${this.raft[j]}`).join(",");
    const args = [
      `--id=${id}`, `--data-dir=${join(this.base, id)}`, `--http-addr=127.0.0.1:${this.http[i]}`, `--raft-addr=127.0.0.1:${this.raft[i]}`,
      `--peers=${peers}`, `--tls-cert-file=${join(this.tls, id + ".pem")}`, `--tls-key-file=${join(this.tls, id + "-key.pem")}`,
      `--peer-cert-file=${join(this.tls, id + ".pem")}`, `--peer-key-file=${join(this.tls, id + "-key.pem")}`, `--peer-ca-file=${this.ca}`,
      ...FAST, "--watch-history-bytes=2097152", ...(this.opts.extraArgs ?? []),
    ];
    const env: NodeJS.ProcessEnv = {};
    for (const [k, v] of Object.entries(process.env)) if (!k.startsWith("BATON_")) env[k] = v;
    env["BATON_ADMIN_TOKEN"] = this.token;
    const log = openSync(join(this.base, `${id}.log`), "a");
    this.procs[i] = spawn(BATOND, args, { env, stdio: ["ignore", log, log] });
    closeSync(log);
  }

  async get(i: number, path: string): Promise<Record<string, unknown> | undefined> {
    return new Promise((res) => {
      const req = https.get({ host: "127.0.0.1", port: this.http[i], path, agent: this.agent, headers: { Authorization: "Bearer " + this.token }, timeout: 2000 }, (r) => {
        const parts: Buffer[] = [];
        r.on("data", (b: Buffer) => parts.push(b));
        r.on("end", () => {
          if (r.statusCode !== 200) return res(undefined);
          try {
            res(JSON.parse(Buffer.concat(parts).toString("utf8")) as Record<string, unknown>);
          } catch {
            res(undefined);
          }
        });
        r.on("error", () => res(undefined));
      });
      req.on("error", () => res(undefined));
      req.on("timeout", () => req.destroy());
    });
  }

  async waitReady(timeoutMs = 30_000): Promise<void> {
    for (let i = 0; i < this.ids.length; i++) {
      if (!this.procs[i]) continue;
      await waitFor(async () => {
        if (this.procs[i]?.exitCode !== null) throw new Error(`${this.ids[i]} exited:\n${this.logTail(i)}`);
        return this.get(i, "/readyz");
      }, `${this.ids[i]} ready`, timeoutMs);
    }
  }

  /** The index of the current leader, waiting for one. */
  async leader(): Promise<number> {
    return (await waitFor(async () => {
      for (let i = 0; i < this.ids.length; i++) {
        if (!this.procs[i] || this.procs[i]!.exitCode !== null) continue;
        const st = await this.get(i, "/v1/cluster?consistency=stale");
        if (st?.["state"] === "Leader") return i + 1;
      }
      return 0;
    }, "a leader")) - 1;
  }

  async kill(i: number): Promise<void> {
    const p = this.procs[i];
    this.procs[i] = undefined;
    if (!p || p.exitCode !== null) return;
    const exited = new Promise((r) => p.once("exit", r));
    p.kill("SIGKILL");
    await exited;
  }

  async restart(i: number): Promise<void> {
    await this.kill(i);
    this.startNode(i);
    await this.waitReady();
  }

  async stop(): Promise<void> {
    for (let i = 0; i < this.procs.length; i++) await this.kill(i);
    this.agent?.destroy();
    // The data dirs hold hundreds of MB of Raft logs and chunks; left
    // behind, a few runs fill the temp dir.
    if (!process.env.BATON_KEEP_TEST_DATA) rmSync(this.base, { recursive: true, force: true });
  }

  logTail(i: number, n = 40): string {
    try {
      return readFileSync(join(this.base, `${this.ids[i]}.log`), "utf8").split("\n").slice(-n).join("\n");
    } catch {
      return "";
    }
  }
}

export function uid(prefix = "x"): string {
  return `${prefix}-${randomUUID().slice(0, 10)}`;
}
