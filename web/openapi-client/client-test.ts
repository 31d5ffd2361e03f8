// A client generated from the served OpenAPI document (openapi-typescript writes ./schema from
// /openapi.json; openapi-fetch calls it), driving the real binary through what a REST consumer
// does: create, list with paging, patch with If-Match, delete. Type-checked against the generated
// schema, then run by cmd/usersd's TestAClientGeneratedFromTheDocumentWorks, which starts the
// service and passes its URL and key in USERSD_URL and USERSD_KEY.
import createClient from "openapi-fetch";
import type { paths } from "./schema";

// What this program uses of Node, declared here rather than through @types/node.
declare const process: { env: Record<string, string | undefined>; exit(code: number): never };

const baseUrl = process.env.USERSD_URL ?? "";
const key = process.env.USERSD_KEY ?? "";
const client = createClient<paths>({ baseUrl });
const auth = { "x-api-key": key };

function expect(ok: boolean, what: string): void {
  if (!ok) throw new Error(what);
}

async function main(): Promise<void> {
  // Create three users, one of them twice with the same idempotency key.
  const ids: number[] = [];
  for (const name of ["Grace", "Ada", "Linus"]) {
    const { data, response } = await client.POST("/users", {
      params: { header: { "Idempotency-Key": `client-test-${name}` } },
      headers: auth,
      body: { name, role: "engineer" },
    });
    expect(response.status === 201 && data?.name === name, `create ${name}: ${response.status}`);
    expect(response.headers.get("Location") === `/users/${data!.id}`, `create ${name}: Location`);
    ids.push(data!.id);
  }
  const again = await client.POST("/users", {
    params: { header: { "Idempotency-Key": "client-test-Ada" } },
    headers: auth,
    body: { name: "Ada", role: "engineer" },
  });
  expect(again.data?.id === ids[1] && again.response.headers.get("Idempotent-Replayed") === "true", "repeat a create");

  // List two a page by name, by page number, then by keyset.
  const first = await client.GET("/users", { params: { query: { sort: "name", limit: 2 } } });
  expect(first.response.status === 200 && first.data?.map((u) => u.name).join() === "Ada,Grace", `page 1: ${JSON.stringify(first.data)}`);
  expect(first.response.headers.get("X-Total-Count") === "3", "X-Total-Count");
  expect(/rel="next"/.test(first.response.headers.get("Link") ?? ""), "Link has next");
  const second = await client.GET("/users", { params: { query: { sort: "name", limit: 2, page: 2 } } });
  expect(second.data?.map((u) => u.name).join() === "Linus", `page 2: ${JSON.stringify(second.data)}`);
  const keyset = await client.GET("/users", { params: { query: { sort: "name", limit: 2, pagination: "keyset" } } });
  const next = /<([^>]*)>; rel="next"/.exec(keyset.response.headers.get("Link") ?? "")?.[1] ?? "";
  const cursor = new URL(next, baseUrl).searchParams.get("cursor") ?? "";
  const after = await client.GET("/users", { params: { query: { sort: "name", limit: 2, cursor } } });
  expect(after.data?.map((u) => u.name).join() === "Linus", `keyset page 2: ${JSON.stringify(after.data)}`);

  // Patch with If-Match: the current tag wins, a stale one is 412 and changes nothing.
  const id = ids[0];
  const read = await client.GET("/users/{id}", { params: { path: { id } } });
  const etag = read.response.headers.get("ETag") ?? "";
  expect(etag !== "" && read.data?.etag === etag, "ETag header is the etag field");
  const patched = await client.PATCH("/users/{id}", {
    params: { path: { id }, header: { "If-Match": etag } },
    headers: auth,
    body: { role: null, name: "Grace Hopper" },
  });
  expect(patched.response.status === 200 && patched.data?.name === "Grace Hopper" && patched.data.role === undefined, "patch");
  const stale = await client.PATCH("/users/{id}", {
    params: { path: { id }, header: { "If-Match": etag } },
    headers: auth,
    body: { name: "Lost Update" },
  });
  expect(stale.response.status === 412 && typeof stale.error?.error === "string", `stale patch: ${stale.response.status}`);

  // Delete with the current tag; the user is gone.
  const deleted = await client.DELETE("/users/{id}", {
    params: { path: { id }, header: { "If-Match": patched.data!.etag } },
    headers: auth,
  });
  expect(deleted.response.status === 204, `delete: ${deleted.response.status}`);
  const gone = await client.GET("/users/{id}", { params: { path: { id } } });
  expect(gone.response.status === 404 && typeof gone.error?.error === "string", "read after delete");
  console.log("generated client: create, idempotent repeat, page and keyset lists, conditional patch, delete: ok");
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
