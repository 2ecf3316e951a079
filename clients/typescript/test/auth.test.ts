// API keys against `attest dev --admin-key`: refusals, the key from $ATTEST_API_KEY, and keys minted, listed,
// used and revoked through the client.

import assert from "node:assert/strict";
import { after, afterEach, before, test } from "node:test";

import { AuthenticationError, Client, PermissionDeniedError } from "attest-client";

import { ADMIN_KEY, Dev, rejects, waitUntil } from "./helpers.js";

let dev: Dev;

before(async () => {
  dev = await Dev.start("auth", ["--admin-key", ADMIN_KEY]);
});

afterEach((t) => {
  // `passed` is there on Node >= 20.12 (the types of @types/node 20 do not say so yet).
  if ((t as { passed?: boolean }).passed === false && dev) dev.failed = true;
});

after(async () => {
  await dev?.stop();
});


test("no key, or a wrong one, is refused with 401", async () => {
  const anonymous = new Client({ baseUrl: dev.url, apiKey: "" });
  const e = await rejects(anonymous.listCollections(), AuthenticationError);
  assert.deepEqual([e.status, e.code], [401, "UNAUTHENTICATED"]);
  const wrong = new Client({ baseUrl: dev.url, apiKey: "attest_nope_0123456789" });
  await rejects(wrong.listCollections(), AuthenticationError);
});

test("the key from $ATTEST_API_KEY", async () => {
  const saved = process.env["ATTEST_API_KEY"];
  process.env["ATTEST_API_KEY"] = ADMIN_KEY;
  try {
    assert.ok(Array.isArray(await new Client({ baseUrl: dev.url }).listCollections()));
  } finally {
    if (saved === undefined) delete process.env["ATTEST_API_KEY"];
    else process.env["ATTEST_API_KEY"] = saved;
  }
});

test("keys: create, list, use within their scope, revoke", async () => {
  const admin = new Client({ baseUrl: dev.url, apiKey: ADMIN_KEY });
  await admin.createCollection("auth-docs", { shards: 1 });
  await admin.uploadDocuments("auth-docs", [{ id: "a", text: "Keys carry scopes and tenants." }]);

  const minted = await admin.createKey(["read"], ["*"], { collections: ["auth-docs"], expiresIn: "1h" });
  assert.ok(minted.key && minted.id);
  assert.deepEqual([minted.scopes, minted.tenants, minted.collections, minted.revoked], [["read"], ["*"], ["auth-docs"], false]);
  assert.ok(minted.expires_at_ms && minted.expires_at_ms > Date.now());
  const listed = await admin.listKeys();
  assert.ok(listed.some((k) => k.id === minted.id && !k.revoked));
  assert.ok(listed.every((k) => !("key" in k)), "a listed key never shows its secret");

  const reader = new Client({ baseUrl: dev.url, apiKey: minted.key });
  assert.deepEqual((await reader.search("auth-docs", "scopes")).hits.map((h) => h.doc_id), ["a"]);
  const denied = await rejects(reader.createCollection("auth-other"), PermissionDeniedError);
  assert.deepEqual([denied.status, denied.code], [403, "PERMISSION_DENIED"]);
  await rejects(reader.createKey(["read"], ["*"]), PermissionDeniedError);

  const revoked = await admin.revokeKey(minted.id);
  assert.deepEqual([revoked.id, revoked.revoked], [minted.id, true]);
  assert.ok((await admin.listKeys()).some((k) => k.id === minted.id && k.revoked));
  // Every front refuses a revoked key within 2 s (they re-read meta every second).
  await waitUntil(
    async () => {
      try {
        await reader.search("auth-docs", "scopes");
        return false;
      } catch (error) {
        if (error instanceof AuthenticationError) return true;
        throw error;
      }
    },
    10_000,
    "the revoked key to be refused",
  );
});
