// vitest's global setup: starts the cluster, hands its address to the
// tests (inject("cluster")), stops it at the end.
import type { TestProject } from "vitest/node";
import { Cluster, type ClusterInfo } from "./cluster.js";

declare module "vitest" {
  export interface ProvidedContext {
    cluster: ClusterInfo;
  }
}

let cluster: Cluster | undefined;

export async function setup(project: TestProject): Promise<void> {
  cluster = new Cluster();
  await cluster.start();
  project.provide("cluster", cluster.info());
}

export async function teardown(): Promise<void> {
  await cluster?.stop();
}
