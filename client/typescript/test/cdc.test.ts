// Chunk boundaries identical to the Go SDK's: the shared vectors of
// testdata/chunking/vectors.json (the spec is client/internal/cdc's doc).
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { cdc } from "@baton-dev/client";

interface Part { kind: "sha256ctr" | "fill"; seed?: string; byte?: number; length: number }
interface Vector { name: string; parts: Part[]; length: number; sha256: string; chunks: { offset: number; size: number; sha256: string }[] }
const V = JSON.parse(readFileSync(fileURLToPath(new URL("../../../testdata/chunking/vectors.json", import.meta.url)), "utf8")) as {
  min_size: number; normal_size: number; max_size: number; mask_s: string; mask_l: string; gear_label: string;
  gear_first: string[]; gear_sha256: string; vectors: Vector[];
};

function part(p: Part): Buffer {
  if (p.kind === "fill") return Buffer.alloc(p.length, p.byte ?? 0);
  const out = Buffer.alloc(p.length);
  const k = Buffer.alloc(8);
  for (let i = 0, off = 0; off < p.length; i++, off += 32) {
    k.writeBigUInt64LE(BigInt(i));
    createHash("sha256").update(Buffer.from(p.seed ?? "", "utf8")).update(k).digest().copy(out, off);
  }
  return out;
}

const hex = (b: Uint8Array) => createHash("sha256").update(b).digest("hex");

describe("content-defined chunking", () => {
  it("has the spec's parameters, masks and gear", () => {
    expect([cdc.MIN_SIZE, cdc.NORMAL_SIZE, cdc.MAX_SIZE]).toEqual([V.min_size, V.normal_size, V.max_size]);
    expect("0x" + cdc.MASK_S.toString(16)).toBe(V.mask_s);
    expect("0x" + cdc.MASK_L.toString(16)).toBe(V.mask_l);
    expect(cdc.GEAR_LABEL).toBe(V.gear_label);
    expect(cdc.GEAR.slice(0, 16).map((g) => "0x" + g.toString(16).padStart(16, "0"))).toEqual(V.gear_first);
    const all = Buffer.alloc(256 * 8);
    cdc.GEAR.forEach((g, i) => all.writeBigUInt64LE(g, 8 * i));
    expect(hex(all)).toBe(V.gear_sha256);
  });

  it.each(V.vectors.map((v) => [v.name, v] as const))("cuts %s as the Go SDK does", async (_name, v) => {
    const input = Buffer.concat(v.parts.map(part));
    expect(input.length).toBe(v.length);
    expect(hex(input)).toBe(v.sha256);
    const want = v.chunks.map((c) => ({ offset: c.offset, size: c.size, sha256: c.sha256 }));
    let off = 0;
    const got = cdc.split(input).map((c) => {
      const r = { offset: off, size: c.length, sha256: hex(c) };
      off += c.length;
      return r;
    });
    expect(got).toEqual(want);
    // The streaming cut, fed in odd-sized blocks, agrees.
    async function* blocks() {
      await Promise.resolve();
      for (let i = 0; i < input.length; i += 777_777) yield input.subarray(i, i + 777_777);
    }
    const streamed: string[] = [];
    for await (const c of cdc.chunksOf(blocks())) streamed.push(hex(c));
    expect(streamed).toEqual(want.map((c) => c.sha256));
  });
});
