// A real three-node batond cluster with TLS, built from this tree
// (bin/batond, or $BATOND), started as client/typescript/test/cluster.ts
// starts one: `batond certs`, three processes on free ports below the
// ephemeral range, each polled until /readyz answers, then a leader.
import { spawn, execFileSync, execFile } from "node:child_process";
import { mkdtempSync, openSync, closeSync, readFileSync, existsSync, rmSync } from "node:fs";
import { randomBytes } from "node:crypto";
import * as https from "node:https";
import * as net from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

export const ROOT = resolve(fileURLToPath(import.meta.url), "../../../..");
const BATOND = process.env.BATOND ?? join(ROOT, "bin", "batond");
const BATON = process.env.BATON ?? join(ROOT, "bin", "baton");
const FAST = ["--heartbeat-timeout=300ms", "--election-timeout=300ms", "--leader-lease-timeout=150ms", "--commit-timeout=20ms"];

/** Polls cond until it answers something truthy, or throws after timeoutMs. */
export async function waitFor(cond, what, timeoutMs = 20_000, everyMs = 50) {
  const deadline = Date.now() + timeoutMs;
  let last;
  while (Date.now() < deadline) {
    try {
      const v = await cond();
      if (v) return v;
    } catch (e) {
      last = e;
    }
    await new Promise((r) => setTimeout(r, everyMs));
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what} (last error: ${last})`);
}

function ephemeralLow() {
  try { return Number(readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").split(/\s+/)[0]) || 32768; } catch { return 32768; }
}

function bindable(port) {
  return new Promise((res) => {
    const s = net.createServer();
    s.once("error", () => res(false));
    s.listen(port, "127.0.0.1", () => s.close(() => res(true)));
  });
}

async function freePorts(n) {
  const lo = 10000, hi = ephemeralLow(), out = [];
  while (out.length < n) {
    const p = lo + Math.floor(Math.random() * (hi - lo));
    if (!out.includes(p) && (await bindable(p))) out.push(p);
  }
  return out;
}

export class Cluster {
  constructor(nodes = 3) {
    this.ids = Array.from({ length: nodes }, (_, i) => `n${i + 1}`);
    this.token = "admin-" + randomBytes(12).toString("hex");
    this.base = mkdtempSync(join(tmpdir(), "baton-console-"));
    this.tls = join(this.base, "tls");
    this.ca = join(this.tls, "ca.pem");
    this.procs = [];
  }

  url(i = 0) { return `https://127.0.0.1:${this.http[i]}`; }

  async start() {
    if (!existsSync(BATOND)) throw new Error(`${BATOND} is missing: run make build`);
    const ports = await freePorts(2 * this.ids.length);
    this.http = ports.slice(0, this.ids.length);
    this.raft = ports.slice(this.ids.length);
    execFileSync(BATOND, ["certs", "--out", this.tls, "--nodes", this.ids.join(",")], { stdio: "pipe" });
    this.agent = new https.Agent({ ca: readFileSync(this.ca), keepAlive: false });
    const peers = this.ids.map((n, j) => `${n}=127.0.0.1:${this.raft[j]}`).join(",");
    for (let i = 0; i < this.ids.length; i++) {
      const id = this.ids[i];
      const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("BATON_")));
      env.BATON_ADMIN_TOKEN = this.token;
      const log = openSync(join(this.base, `${id}.log`), "a");
      this.procs[i] = spawn(BATOND, [
        `--id=${id}`, `--data-dir=${join(this.base, id)}`, `--http-addr=127.0.0.1:${this.http[i]}`, `--raft-addr=127.0.0.1:${this.raft[i]}`,
        `--peers=${peers}`, `--tls-cert-file=${join(this.tls, id + ".pem")}`, `--tls-key-file=${join(this.tls, id + "-key.pem")}`,
        `--peer-cert-file=${join(this.tls, id + ".pem")}`, `--peer-key-file=${join(this.tls, id + "-key.pem")}`, `--peer-ca-file=${this.ca}`, ...FAST,
      ], { env, stdio: ["ignore", log, log] });
      closeSync(log);
    }
    for (let i = 0; i < this.ids.length; i++) {
      await waitFor(async () => {
        if (this.procs[i].exitCode !== null) throw new Error(`${this.ids[i]} exited:\n${this.logTail(i)}`);
        return (await this.request(i, "GET", "/readyz")).status === 200;
      }, `${this.ids[i]} ready`, 30_000);
    }
    await waitFor(async () => {
      for (let i = 0; i < this.ids.length; i++) {
        const r = await this.request(i, "GET", "/v1/cluster?consistency=stale");
        if (r.body && r.body.state === "Leader") return true;
      }
      return false;
    }, "a leader");
  }

  /** One request to node i: {status, body} (body decoded when JSON). */
  request(i, method, path, body, token = this.token) {
    return new Promise((res, rej) => {
      const data = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
      const req = https.request({ host: "127.0.0.1", port: this.http[i], path, method, agent: this.agent, timeout: 10_000,
        headers: { Authorization: "Bearer " + token, ...(data ? { "Content-Type": "application/json", "Content-Length": data.length } : {}) } }, (r) => {
        const parts = [];
        r.on("data", (b) => parts.push(b));
        r.on("end", () => {
          const text = Buffer.concat(parts).toString("utf8");
          let parsed = text;
          try { parsed = text ? JSON.parse(text) : undefined; } catch { /* not JSON */ }
          res({ status: r.statusCode, headers: r.headers, body: parsed });
        });
        r.on("error", rej);
      });
      req.on("error", rej);
      req.on("timeout", () => req.destroy(new Error("timeout")));
      if (data) req.write(data);
      req.end();
    });
  }

  /** A request that must answer one of ok (default 2xx); answers the body. */
  async api(method, path, body, { token, ok } = {}) {
    const r = await this.request(0, method, path, body, token);
    if (ok ? !ok.includes(r.status) : r.status >= 300) throw new Error(`${method} ${path}: ${r.status} ${JSON.stringify(r.body)}`);
    return r.body;
  }

  /** bin/baton with the cluster's endpoints, token and CA. */
  cli(...args) {
    const env = { ...process.env, BATON_ENDPOINTS: this.http.map((p) => `https://127.0.0.1:${p}`).join(","), BATON_TOKEN: this.token, BATON_CACERT: this.ca };
    return new Promise((res, rej) => execFile(BATON, args, { env, timeout: 20_000 }, (err, stdout, stderr) => err ? rej(new Error(`baton ${args.join(" ")}: ${err.message}\n${stderr}`)) : res(stdout)));
  }

  /** Kills node i (SIGKILL) and waits for it to exit. */
  kill(i) {
    const p = this.procs[i];
    return new Promise((r) => {
      if (!p || p.exitCode !== null) return r();
      p.once("exit", r);
      p.kill("SIGKILL");
    });
  }

  logTail(i, n = 40) {
    try { return readFileSync(join(this.base, `${this.ids[i]}.log`), "utf8").split("\n").slice(-n).join("\n"); } catch { return ""; }
  }

  async stop() {
    await Promise.all(this.procs.map((p) => new Promise((r) => {
      if (!p || p.exitCode !== null) return r();
      p.once("exit", r);
      p.kill("SIGKILL");
    })));
    this.agent?.destroy();
    rmSync(this.base, { recursive: true, force: true });
  }
}
