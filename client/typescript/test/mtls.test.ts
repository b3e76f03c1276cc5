// Client certificates: a one-node cluster started with --client-ca-file
// accepts a client that presents BATON_CERT / BATON_KEY (fromEnv) and
// refuses the TLS handshake of one that presents none.
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BatonClient, BatonError, InvalidArgument } from "@baton-dev/client";
import { BATOND, Cluster } from "./cluster.js";

describe("client certificates (batond --client-ca-file)", () => {
  let cl: Cluster;
  let env: NodeJS.ProcessEnv;
  beforeAll(async () => {
    // The clients' CA must not be the members' (docs/operations.md): a certificate of its own.
    const dir = mkdtempSync(join(tmpdir(), "baton-ts-mtls-"));
    execFileSync(BATOND, ["certs", "--out", dir, "--nodes", "agent"], { stdio: "pipe" });
    const cert = join(dir, "agent.pem"), key = join(dir, "agent-key.pem");
    cl = new Cluster(1, {
      extraArgs: [`--client-ca-file=${join(dir, "ca.pem")}`],
      probeCert: { cert: readFileSync(cert), key: readFileSync(key) },
    });
    await cl.start();
    env = { BATON_ENDPOINTS: cl.endpoints.join(","), BATON_TOKEN: cl.token, BATON_CACERT: cl.ca, BATON_CERT: cert, BATON_KEY: key };
  }, 60_000);
  afterAll(async () => cl?.stop());

  it("presents BATON_CERT and BATON_KEY from fromEnv", async () => {
    const c = BatonClient.fromEnv({}, env);
    try {
      const st = await c.clusterStatus();
      expect(st.leader.id).toBe("n1");
    } finally {
      c.close();
    }
  });

  it("is refused without a certificate", async () => {
    const c = BatonClient.fromEnv({ maxRetryMs: 500 }, { ...env, BATON_CERT: "", BATON_KEY: "" });
    try {
      const err = await c.clusterStatus().catch((e: unknown) => e);
      expect(err).toBeInstanceOf(BatonError);
      expect((err as BatonError).code).toBe("tls");
      expect((err as BatonError).message).toMatch(/client certificate/);
    } finally {
      c.close();
    }
  });

  it("wants a key with a certificate", () => {
    expect(() => BatonClient.fromEnv({}, { ...env, BATON_KEY: "" })).toThrow(InvalidArgument);
  });
});
