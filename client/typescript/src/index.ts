// @baton-dev/client: the TypeScript SDK of Baton. The LangGraph.js
// checkpointer is in "@baton-dev/client/langgraph".

export { BatonClient, DEFAULT_ENDPOINTS, keyPath, query, scheduleTaskId, seg, sha256 } from "./client.js";
export type { CallOptions, ClientOptions, TxnOp, UploadSource, UploadStats } from "./client.js";
export * from "./errors.js";
export type * from "./models.js";
export { Watch } from "./watch.js";
export type { WatchOptions } from "./watch.js";
export { NonRetryable, TaskContext, Worker } from "./worker.js";
export type { Handler, WorkerOptions } from "./worker.js";
export { newIdempotencyKey } from "./transport.js";
export type { Meta } from "./transport.js";
export * as cdc from "./cdc.js";
export { OpFailed, OpInDoubt, OpUnrecorded, once, paramsDigest } from "./once.js";
