// @langchain/langgraph-checkpoint-validation, as published, against
// BatonSaver on the three-node cluster: validate() (every suite of its
// specTest: getTuple, list, put, putWrites, deleteThread) and the opt-in
// deltaChannelHistoryTests, on vitest, the runner it is built for (its
// suites use vitest's globals). The package's CLI cannot load an
// initializer in 1.1.1: its dist/runner.ts imports findPackageRoot and
// checkpointerTestInitializerSchema, which its dist/*.js do not export;
// this is the library entry its README gives for an existing suite.
//
// Every checkpointer the suite makes gets a fresh tenant: the suite reuses
// thread ids ("thread-1", "1") across its tests, and its list tests read
// every thread of the saver's storage.
import { deltaChannelHistoryTests, validate } from "@langchain/langgraph-checkpoint-validation";
import { BatonClient } from "@baton-dev/client";
import { BatonSaver } from "@baton-dev/client/langgraph";
import { admin, cluster, uid } from "./helpers.js";

const clients = new WeakMap<BatonSaver, BatonClient>();

const initializer = {
  checkpointerName: "BatonSaver",
  async createCheckpointer(): Promise<BatonSaver> {
    const tenant = uid("lg");
    const a = admin();
    await a.createTenant(tenant);
    a.close();
    const c = cluster();
    const client = new BatonClient({ endpoints: c.endpoints, token: c.token, caFile: c.ca, tenant });
    const saver = new BatonSaver(client);
    clients.set(saver, client);
    return saver;
  },
  destroyCheckpointer(saver: BatonSaver): void {
    clients.get(saver)?.close();
  },
};

validate(initializer);
deltaChannelHistoryTests(initializer);
