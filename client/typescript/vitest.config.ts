import { defineConfig } from "vitest/config";

// The SDK's tests: one three-node TLS cluster of bin/batond for the whole
// run (test/setup.ts), files run one at a time (they share it).
export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    globalSetup: ["test/setup.ts"],
    globals: true,
    fileParallelism: false,
    testTimeout: 60_000,
    hookTimeout: 60_000,
  },
});
