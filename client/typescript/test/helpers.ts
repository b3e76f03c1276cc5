import { inject } from "vitest";
import { BatonClient, type ClientOptions } from "@baton-dev/client";
import { uid } from "./cluster.js";

export const cluster = () => inject("cluster");

/** A client of the test cluster (admin token). */
export function admin(o: ClientOptions = {}): BatonClient {
  const c = cluster();
  return new BatonClient({ endpoints: c.endpoints, token: c.token, caFile: c.ca, ...o });
}

/** A fresh tenant and a client whose default it is. */
export async function tenantClient(o: ClientOptions = {}): Promise<BatonClient> {
  const a = admin();
  const t = uid("t");
  await a.createTenant(t);
  a.close();
  return admin({ tenant: t, ...o });
}

export { uid };
