// A LangGraph.js graph on BatonSaver: it stops at an interrupt(), and a
// Command({ resume }) continues it from the cluster, from another saver
// (another process's view of the thread); two runs resuming one thread at
// once cannot both extend it.
import { Annotation, Command, END, START, StateGraph, interrupt } from "@langchain/langgraph";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BatonClient } from "@baton-dev/client";
import { BatonSaver, ThreadConflict } from "@baton-dev/client/langgraph";
import { emptyCheckpoint, uuid6 } from "@langchain/langgraph-checkpoint";
import { admin, tenantClient, uid } from "./helpers.js";

const State = Annotation.Root({
  topic: Annotation<string>,
  approved: Annotation<boolean>,
  log: Annotation<string[]>({ reducer: (a, b) => a.concat(b), default: () => [] }),
});

function build(saver: BatonSaver) {
  return new StateGraph(State)
    .addNode("draft", (s) => ({ log: [`drafted ${s.topic}`] }))
    .addNode("review", () => {
      const answer = interrupt<{ ask: string }, boolean>({ ask: "approve the draft?" });
      return { approved: answer, log: [answer ? "approved" : "rejected"] };
    })
    .addNode("publish", () => ({ log: ["published"] }))
    .addEdge(START, "draft")
    .addEdge("draft", "review")
    .addConditionalEdges("review", (s) => (s.approved ? "publish" : END))
    .addEdge("publish", END)
    .compile({ checkpointer: saver });
}

let c1: BatonClient;
let c2: BatonClient;
beforeAll(async () => {
  c1 = await tenantClient();
  c2 = admin({ tenant: c1.tenant! });
});
afterAll(() => {
  c1.close();
  c2.close();
});

describe("a LangGraph.js graph on Baton", () => {
  it("stops at an interrupt and resumes from the cluster with Command({ resume })", async () => {
    const config = { configurable: { thread_id: uid("thread") } };
    const first = build(new BatonSaver(c1));
    const out = await first.invoke({ topic: "fencing" }, config);
    expect(out.log).toEqual(["drafted fencing"]);
    const interrupts = (out as unknown as { __interrupt__?: { value: unknown }[] }).__interrupt__;
    expect(interrupts?.map((i) => i.value)).toEqual([{ ask: "approve the draft?" }]);
    const state = await first.getState(config);
    expect(state.next).toEqual(["review"]);

    // Another process (its own client and saver) resumes the thread.
    const second = build(new BatonSaver(c2));
    const done = await second.invoke(new Command({ resume: true }), config);
    expect(done.log).toEqual(["drafted fencing", "approved", "published"]);
    expect(done.approved).toBe(true);
    expect((await second.getState(config)).next).toEqual([]);
    const history: string[] = [];
    for await (const s of second.getStateHistory(config)) history.push(String(s.metadata?.source));
    expect(history.length).toBeGreaterThanOrEqual(5);
    expect(history.at(-1)).toBe("input");
  });

  it("lets one of two runs that loaded the same head extend it; the other gets ThreadConflict", async () => {
    const thread = uid("thread");
    const a = new BatonSaver(c1);
    const b = new BatonSaver(c2);
    const meta = { source: "loop" as const, step: 0, parents: {} };
    const root = await a.put({ configurable: { thread_id: thread } }, { ...emptyCheckpoint(), id: uuid6(0) }, meta, {});
    const headA = await a.getTuple({ configurable: { thread_id: thread } });
    const headB = await b.getTuple({ configurable: { thread_id: thread } });
    expect(headA!.config).toEqual(root);
    expect(headB!.config).toEqual(root);
    await a.put(headA!.config, { ...emptyCheckpoint(), id: uuid6(1) }, { ...meta, step: 1 }, {});
    const err = await b.put(headB!.config, { ...emptyCheckpoint(), id: uuid6(2) }, { ...meta, step: 1 }, {}).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ThreadConflict);
    // Time travel (a checkpoint asked for by id) forks, as LangGraph means it to.
    const old = await b.getTuple(root);
    const fork = await b.put(old!.config, { ...emptyCheckpoint(), id: uuid6(3) }, { ...meta, step: 1 }, {});
    expect((await b.getTuple({ configurable: { thread_id: thread } }))!.config).toEqual(fork);
  });

  it("keeps a state larger than a request: values inline in chunked data, read whole by getTuple and list", async () => {
    const thread = uid("thread");
    const saver = new BatonSaver(c1);
    const big = "x".repeat(3 << 20);
    const cp = { ...emptyCheckpoint(), id: uuid6(0), channel_values: { doc: big, n: 1 }, channel_versions: { doc: 1, n: 1 } };
    const cfg = await saver.put({ configurable: { thread_id: thread } }, cp, { source: "input", step: -1, parents: {} }, { doc: 1, n: 1 });
    expect((await saver.getTuple(cfg))!.checkpoint.channel_values).toEqual({ doc: big, n: 1 });
    const listed = [];
    for await (const t of saver.list({ configurable: { thread_id: thread } })) listed.push(t);
    expect(listed.map((t) => t.checkpoint.channel_values)).toEqual([{ doc: big, n: 1 }]);
  });
});
