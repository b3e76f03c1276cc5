// The cas workload through the TypeScript SDK (the sdk workload of make
// bench): C workers in this one Node process, sharing one BatonClient,
// each owning one task it claimed, loop fenced updates of it, the
// operation of the Go SDK's workload (bench/baton/cas.go):
// updateTask(id, { fencingToken: <the claim's>, result: { n: <count> } }).
//
// Measured as bench/loadgen and bench/python/benchlib.py measure: closed
// loops, a warm-up and a window; an operation counts when it starts in the
// window; a failed one pauses its worker 5 ms; latencies in
// bench/result's histogram buckets. Writes one bench/result.Run as JSON
// on stdout, progress on stderr. The Go driver (bench/cmd/bench, workload
// sdk) runs it against the cluster it started:
//
//   node client/typescript/dist-bench/sdkbench.js --endpoints http://127.0.0.1:7001,... \
//     --token T --tenant bench --clients 64 --warmup 5s --duration 12s

import { parseArgs } from "node:util";
import { BatonClient } from "@baton-dev/client";

const LEASE_MS = 3_600_000;
const TXN_BATCH = 128;
const SUB_BUCKETS = 64;
const MAX_BUCKET = 30 * SUB_BUCKETS;
const ERROR_PAUSE_MS = 5;

/** bench/result.Histogram: bucket i holds [2^(i/64), 2^((i+1)/64)) microseconds. */
class Histogram {
  count = 0;
  sumNs = 0;
  minNs = 0;
  maxNs = 0;
  dense = new Map<number, number>();

  record(ns: number): void {
    ns = Math.max(ns, 0);
    const us = ns / 1000;
    const i = us <= 1 ? 0 : Math.min(Math.floor(Math.log2(us) * SUB_BUCKETS), MAX_BUCKET);
    this.dense.set(i, (this.dense.get(i) ?? 0) + 1);
    if (this.count === 0 || ns < this.minNs) this.minNs = ns;
    this.maxNs = Math.max(this.maxNs, ns);
    this.count++;
    this.sumNs += ns;
  }

  quantileMs(q: number): number {
    if (this.count === 0) return 0;
    const rank = Math.max(Math.ceil(q * this.count), 1);
    let seen = 0;
    for (const i of [...this.dense.keys()].sort((a, b) => a - b)) {
      seen += this.dense.get(i)!;
      if (seen >= rank) return Math.min(Math.max(2 ** ((i + 0.5) / SUB_BUCKETS) * 1000, this.minNs), this.maxNs) / 1e6;
    }
    return this.maxNs / 1e6;
  }

  toJSON(): object {
    return {
      count: this.count, sum_ns: Math.round(this.sumNs), min_ns: Math.round(this.minNs), max_ns: Math.round(this.maxNs),
      buckets: [...this.dense.keys()].sort((a, b) => a - b).map((i) => [i, this.dense.get(i)]),
    };
  }
}

/** Seconds of a Go duration ("5s", "1m30s", "500ms"), or a plain number of seconds. */
function duration(text: string): number {
  if (/^\d+(\.\d*)?$/.test(text)) return Number(text);
  const unit: Record<string, number> = { ns: 1e-9, us: 1e-6, µs: 1e-6, ms: 1e-3, s: 1, m: 60, h: 3600 };
  let total = 0;
  let rest = text;
  while (rest) {
    const m = /^(\d+(?:\.\d*)?)(ns|us|µs|ms|s|m|h)/.exec(rest);
    if (!m) throw new Error(`${JSON.stringify(text)} is not a duration (e.g. 5s, 1m30s, 500ms)`);
    total += Number(m[1]) * unit[m[2]!]!;
    rest = rest.slice(m[0].length);
  }
  return total;
}

function log(msg: string): void {
  process.stderr.write(`${new Date().toISOString().slice(11, 19)} ${msg}\n`);
}

async function main(): Promise<void> {
  const { values: a } = parseArgs({
    options: {
      endpoints: { type: "string" },
      token: { type: "string" },
      tenant: { type: "string", default: "bench" },
      "ca-file": { type: "string" },
      clients: { type: "string", default: "64" },
      prefix: { type: "string", default: "" },
      warmup: { type: "string", default: "5s" },
      duration: { type: "string", default: "12s" },
      seed: { type: "string", default: "1" },
    },
  });
  if (!a.endpoints || !a.token) throw new Error("--endpoints and --token are required");
  const n = Number(a.clients);
  if (!(n >= 1)) throw new Error("--clients: want 1 or more");
  const warmup = duration(a.warmup);
  const window = duration(a.duration);
  const prefix = a.prefix || `tscas${n}-`;
  const client = new BatonClient({ endpoints: a.endpoints.split(","), token: a.token, caFile: a["ca-file"], tenant: a.tenant });
  const ids = Array.from({ length: n }, (_, i) => prefix + String(i));
  for (let lo = 0; lo < n; lo += TXN_BATCH) {
    await client.txn(ids.slice(lo, lo + TXN_BATCH).map((task_id) => ({ op: "task.create" as const, task_id, queue: "cas" })));
  }
  const tokens = (await Promise.all(ids.map((id, i) => client.claimTask(id, { owner: `client-${i}`, leaseMs: LEASE_MS })))).map((t) => t.fencing_token);
  const counts = new Array<number>(n).fill(0);
  log(`sdkbench: ${n} tasks claimed; cas C=${n} for ${warmup}+${window} s (one BatonClient shared by the workers)`);

  const lat = new Histogram();
  let ok = 0;
  let errors = 0;
  const samples: string[] = [];
  const start = performance.now();
  const wstart = start + warmup * 1000;
  const end = wstart + window * 1000;
  const worker = async (i: number) => {
    for (;;) {
      const t0 = performance.now();
      if (t0 >= end) return;
      const measuring = t0 >= wstart;
      let err: unknown;
      try {
        counts[i]!++;
        await client.updateTask(ids[i]!, { fencingToken: tokens[i], result: { n: counts[i] } });
      } catch (e) {
        err = e;
      }
      const t1 = performance.now();
      if (measuring) {
        if (err === undefined) {
          ok++;
          lat.record((t1 - t0) * 1e6);
        } else {
          errors++;
          const msg = (err instanceof Error ? `${err.name}: ${err.message}` : JSON.stringify(err)).slice(0, 300);
          if (!samples.includes(msg) && samples.length < 3) samples.push(msg);
        }
      }
      if (err !== undefined) await new Promise((r) => setTimeout(r, ERROR_PAUSE_MS));
    }
  };
  await Promise.all(ids.map((_, i) => worker(i)));
  client.close();
  const run: Record<string, unknown> = {
    system: "baton", workload: "sdk", variant: `C=${n}`, client: "typescript",
    workers: n, seed: Number(a.seed), warmup_ms: Math.round(warmup * 1000), window_ms: window * 1000,
    ops: ok, errors, ops_per_sec: window > 0 ? ok / window : 0, latency: lat.toJSON(),
    metrics: { p50_ms: lat.quantileMs(0.5), p99_ms: lat.quantileMs(0.99), p999_ms: lat.quantileMs(0.999) },
    notes: [`Node ${process.version}, one BatonClient shared by the workers`],
  };
  if (samples.length) run["error_samples"] = samples;
  const m = run["metrics"] as { p50_ms: number; p99_ms: number };
  process.stderr.write(`baton sdk C=${n}: ${(ok / window).toFixed(0)} ops/s, p50 ${m.p50_ms.toFixed(2)} ms, p99 ${m.p99_ms.toFixed(2)} ms, ${errors} errors\n`);
  process.stdout.write(JSON.stringify(run) + "\n");
}

main().catch((e: unknown) => {
  process.stderr.write(`sdkbench: ${e instanceof Error ? (e.stack ?? e.message) : JSON.stringify(e)}\n`);
  process.exit(1);
});
