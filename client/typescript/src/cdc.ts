// Baton's content-defined chunking, the same cut as every Baton SDK's. The
// specification is the package doc of the Go package client/internal/cdc;
// testdata/chunking/vectors.json holds the vectors every SDK's tests check.
// FastCDC with normalized chunking (level 2): for each chunk, with fp a
// 64-bit unsigned integer starting at 0,
//
//   limit = min(len(rest), MAX_SIZE)
//   for i in MIN_SIZE .. limit-1:
//     fp = (fp << 1) + GEAR[rest[i]]  (mod 2^64)
//     if fp & (i < NORMAL_SIZE ? MASK_S : MASK_L) == 0: cut after byte i
//   otherwise the chunk is rest[:limit]
//
// GEAR[i] is the first 8 bytes of SHA-256("baton-cdc-gear-v1" + byte i),
// little-endian. fp is kept as two 32-bit halves, so the loop does no
// BigInt arithmetic.

import { createHash } from "node:crypto";

export const MIN_SIZE = 256 * 1024;
export const NORMAL_SIZE = 1024 * 1024;
/** Also the server's limit on one chunk body. */
export const MAX_SIZE = 4 * 1024 * 1024;
export const GEAR_LABEL = "baton-cdc-gear-v1";

/** The mask with n one-bits: bit 63 - (j*64)/n for j in 0..n-1. */
export function makeMask(n: number): bigint {
  let m = 0n;
  for (let j = 0; j < n; j++) m |= 1n << BigInt(63 - Math.floor((j * 64) / n));
  return m;
}

export const MASK_S = makeMask(22); // 0xa4924924a4924924
export const MASK_L = makeMask(18); // 0x9122448891224488

/** GEAR as 64-bit values (tests compare them with the vectors). */
export const GEAR: readonly bigint[] = Array.from({ length: 256 }, (_, i) =>
  createHash("sha256").update(Buffer.concat([Buffer.from(GEAR_LABEL), Buffer.from([i])])).digest().readBigUInt64LE(0),
);
const GEAR_HI = Uint32Array.from(GEAR, (g) => Number(g >> 32n));
const GEAR_LO = Uint32Array.from(GEAR, (g) => Number(g & 0xffffffffn));
const MS_HI = Number(MASK_S >> 32n);
const MS_LO = Number(MASK_S & 0xffffffffn);
const ML_HI = Number(MASK_L >> 32n);
const ML_LO = Number(MASK_L & 0xffffffffn);

/**
 * The length of the first chunk of data: the rest of the input, or at least
 * its next MAX_SIZE bytes. 0 only for empty data.
 */
export function cut(data: Uint8Array): number {
  const limit = Math.min(data.length, MAX_SIZE);
  if (limit <= MIN_SIZE) return limit;
  let hi = 0;
  let lo = 0;
  const normal = Math.min(limit, NORMAL_SIZE);
  for (let i = MIN_SIZE; i < limit; i++) {
    const b = data[i]!;
    // fp = (fp << 1) + GEAR[b], in two 32-bit halves.
    const shLo = (lo << 1) >>> 0;
    const sumLo = shLo + GEAR_LO[b]!;
    hi = (((hi << 1) | (lo >>> 31)) + GEAR_HI[b]! + (sumLo > 0xffffffff ? 1 : 0)) >>> 0;
    lo = sumLo >>> 0;
    if (i < normal) {
      if ((hi & MS_HI) === 0 && (lo & MS_LO) === 0) return i + 1;
    } else if ((hi & ML_HI) === 0 && (lo & ML_LO) === 0) {
      return i + 1;
    }
  }
  return limit;
}

/** The chunks of data, in order (none for empty data); views into data. */
export function split(data: Uint8Array): Uint8Array[] {
  const out: Uint8Array[] = [];
  let off = 0;
  while (off < data.length) {
    const n = cut(data.subarray(off));
    out.push(data.subarray(off, off + n));
    off += n;
  }
  return out;
}

/**
 * The chunks of a stream of byte blocks, in order. Memory stays about
 * MAX_SIZE bytes of buffer plus the chunk handed out.
 */
export async function* chunksOf(source: AsyncIterable<Uint8Array>): AsyncGenerator<Uint8Array> {
  let buf = Buffer.alloc(0);
  for await (const block of source) {
    buf = buf.length === 0 ? Buffer.from(block) : Buffer.concat([buf, block]);
    while (buf.length >= MAX_SIZE) {
      const n = cut(buf);
      yield Buffer.from(buf.subarray(0, n));
      buf = buf.subarray(n);
    }
  }
  while (buf.length > 0) {
    const n = cut(buf);
    yield Buffer.from(buf.subarray(0, n));
    buf = buf.subarray(n);
  }
}
