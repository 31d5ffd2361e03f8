// Dredd's hooks for openapi.json: TestDreddKeepsTheDocumentTrue (cmd/usersd/dredd_test.go) runs
// Dredd with them against the real binary, which it starts with the keys and settings named below.
// Dredd makes one transaction of every status of every operation, named
// "<path> > <summary> > <status> > <content type>", and sends what the document gives as examples.
// These hooks give each transaction the state it needs (a credential, a user to read and write),
// turn each error status that a request can provoke into the request that provokes it, and skip
// only what Dredd cannot test, each skip with its reason.
const hooks = require('hooks');

const env = (name) => {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set: run Dredd through TestDreddKeepsTheDocumentTrue`);
  return value;
};
// Keys of the binary's keys file: one with both scopes, one with users.read alone, one with
// users.write alone. The binary runs with -public-reads=false, so that reads check credentials too.
const key = env('USERSD_KEY');
const readKey = env('USERSD_READ_KEY');
const writeKey = env('USERSD_WRITE_KEY');
// The binary's -max-body-bytes.
const maxBodyBytes = Number(env('USERSD_MAX_BODY_BYTES'));

// The receiver of the webhook subscriptions the hooks make: nothing listens there, and the binary
// runs with -webhooks-allow-private, so that a loopback https URL is allowed.
const webhookReceiver = 'https://127.0.0.1:9/hooks';

// A path id that no user or subscription will have, and one that is no id.
const missingID = 2147483647;
const malformedID = 0;

let baseURL; // the binary's
let user; // the user that the operations of /users/{id} read and write
let webhook; // the subscription that the operations of /webhooks/{id} read and write
let document; // openapi.json as the binary serves it

async function call(method, path, { headers = {}, body } = {}) {
  const res = await fetch(baseURL + path, {
    method,
    headers: { 'x-api-key': key, ...(body === undefined ? {} : { 'Content-Type': 'application/json' }), ...headers },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${await res.text()}`);
  return res;
}

async function createUser(name) {
  return (await call('POST', '/users', { body: { name } })).json();
}

async function createWebhook() {
  return (await call('POST', '/webhooks', { body: { url: webhookReceiver } })).json();
}

// withID points a transaction of /users/{id}... or /webhooks/{id}... at the user or subscription
// with id instead of the example's.
function withID(t, id) {
  t.fullPath = t.fullPath.replace(/^\/(users|webhooks)\/[0-9]+/, (_, resource) => `/${resource}/${id}`);
  t.request.uri = t.fullPath;
}

function withQuery(t, query) {
  t.fullPath = `${t.fullPath.split('?')[0]}?${query}`;
  t.request.uri = t.fullPath;
}

const isUserPath = (t) => t.origin.resourceName.startsWith('/users/{id}');
const isWebhookPath = (t) => t.origin.resourceName.startsWith('/webhooks/{id}');

// provoke turns a transaction that expects an error status into the request that gets it from
// the binary, and returns true; or returns false when no request can get it here.
const provoke = {
  400: async (t) => {
    if (isUserPath(t) || isWebhookPath(t)) withID(t, malformedID);
    else if (t.request.method === 'GET') withQuery(t, 'afterSequence=x&limit=x'); // each route refuses what is not its own
    else t.request.body = '{'; // POST /users and /echo: not JSON
    return true;
  },
  401: async (t) => {
    t.request.headers['x-api-key'] = 'not-a-key-of-this-service';
    return true;
  },
  403: async (t) => {
    t.request.headers['x-api-key'] = t.request.method === 'GET' ? writeKey : readKey;
    return true;
  },
  404: async (t) => {
    withID(t, missingID);
    if (t.origin.resourceName === '/users:batchGet') withQuery(t, `ids=${missingID}`);
    if (t.origin.resourceName === '/users:batchDelete') t.request.body = JSON.stringify({ ids: [missingID] });
    return true;
  },
  // The resume point is newer than every change. A replay's 410 needs changes swept from the
  // log, which keeps them for a day at least; webhooks/engine_test.go and the store's tests see it.
  410: async (t) => {
    if (t.origin.resourceName === '/webhooks/{id}:replay') return false;
    withQuery(t, `afterSequence=${Number.MAX_SAFE_INTEGER}`);
    return true;
  },
  412: async (t) => {
    t.request.headers['If-Match'] = '"not-the-etag"';
    return true;
  },
  413: async (t) => {
    t.request.body = JSON.stringify({ name: 'x'.repeat(maxBodyBytes) });
    return true;
  },
  415: async (t) => {
    t.request.headers['Content-Type'] = 'text/plain';
    return true;
  },
  // The same idempotency key, first used for another request.
  422: async (t) => {
    const idempotencyKey = `dredd-${t.origin.resourceName}-${Date.now()}`;
    const other = {
      '/users': { name: 'Someone else' },
      '/users:batchCreate': { requests: [{ user: { name: 'Someone else' } }] },
    }[t.origin.resourceName] ?? { title: 'Another post' };
    await call('POST', t.fullPath, { headers: { 'Idempotency-Key': idempotencyKey }, body: other });
    t.request.headers['Idempotency-Key'] = idempotencyKey;
    return true;
  },
  // A request with this idempotency key still running: the first request would have to be held
  // inside the server while Dredd sends the second, which no request can make it do.
  409: async () => false,
  // The binary runs without -rate-limit, as every other transaction needs; the limit's 429 (and the
  // watch slots' 429) are tested in handlers/rate_limit_test.go and handlers/watch_test.go.
  429: async () => false,
  // A fault of the service: only /boom has one on purpose (below).
  500: async (t) => t.origin.resourceName === '/boom',
  // The store is down, the server drains, or its answer memory is full: not while Dredd runs.
  503: async () => false,
  // The request's work outlasts -request-timeout: no request makes a healthy store that slow.
  504: async () => false,
};

// inlined is node with every $ref of the document replaced by what it points at (the document
// has no cycles).
function inlined(node) {
  if (Array.isArray(node)) return node.map(inlined);
  if (node === null || typeof node !== 'object') return node;
  if (typeof node.$ref === 'string') {
    const target = node.$ref.slice(2).split('/').map((part) => part.replaceAll('~1', '/').replaceAll('~0', '~'))
      .reduce((at, part) => at[part], document);
    return inlined(target);
  }
  return Object.fromEntries(Object.entries(node).map(([name, value]) => [name, inlined(value)]));
}

// expectWhatTheDocumentSays makes Dredd hold the answer to what the document says of it. Dredd 14
// reads OpenAPI 3.0 and drops what it does not know of 3.1 and more besides, "required" among it:
// it would check a body against an example made of every property, as if each were required
// (a user without a role would fail), and want every header the response names, as if each were
// always sent (Idempotent-Replayed comes only on a replay). So the body is checked against the
// operation's own schema, and only the headers the document marks required are wanted.
function expectWhatTheDocumentSays(t) {
  const operation = document.paths[t.origin.resourceName][t.request.method.toLowerCase()];
  const response = inlined(operation.responses[t.expected.statusCode]);
  for (const [name, header] of Object.entries(response.headers ?? {})) {
    if (!header.required) delete t.expected.headers[name];
  }
  const mediaType = response.content?.[t.expected.headers['Content-Type']];
  if (mediaType?.schema) t.expected.bodySchema = withoutOpenAPIFormats(mediaType.schema);
}

// withoutOpenAPIFormats is schema without the formats that OpenAPI adds to JSON Schema's (int32,
// int64), which Dredd's JSON Schema validator refuses as unknown; their bounds are OpenAPI's to
// check (the contract checker of the Go tests does).
function withoutOpenAPIFormats(schema) {
  if (Array.isArray(schema)) return schema.map(withoutOpenAPIFormats);
  if (schema === null || typeof schema !== 'object') return schema;
  return Object.fromEntries(Object.entries(schema)
    .filter(([name, value]) => !(name === 'format' && (value === 'int32' || value === 'int64')))
    .map(([name, value]) => [name, withoutOpenAPIFormats(value)]));
}

hooks.beforeAll((transactions, done) => {
  const first = transactions[0];
  baseURL = `${first.protocol}//${first.host}:${first.port}`;
  (async () => {
    document = await (await call('GET', '/openapi.json')).json();
    user = await createUser('Dredd');
    webhook = await createWebhook();
  })().then(() => done(), (err) => {
    for (const t of transactions) t.fail = `the hooks could not set up: ${err.message}`;
    done();
  });
});

hooks.beforeEach((t, done) => {
  (async () => {
    expectWhatTheDocumentSays(t);
    // Dredd sends a header parameter that has no example as an empty header, which the server
    // rightly refuses (an empty Idempotency-Key or Consistency-Token is malformed): leave them out.
    for (const [name, value] of Object.entries(t.request.headers)) {
      if (value === '') delete t.request.headers[name];
    }
    t.request.headers['x-api-key'] = key;
    if (isUserPath(t)) withID(t, user.id);
    if (isWebhookPath(t)) withID(t, webhook.id);
    // The document's example receiver does not resolve here: subscriptions are made to the hooks' own.
    if (t.origin.resourceName === '/webhooks' && t.request.method === 'POST') {
      t.request.body = JSON.stringify({ ...JSON.parse(t.request.body), url: webhookReceiver });
    }

    const status = Number(t.expected.statusCode);
    // A batch delete gets users of its own, so that the operations after it still have theirs.
    if (t.origin.resourceName === '/users:batchDelete' && status === 200) {
      const doomed = [await createUser('Dredd, to batch-delete'), await createUser('Dredd, to batch-delete too')];
      t.request.body = JSON.stringify({ ids: doomed.map((u) => u.id) });
    }
    // Only a deleted user can be restored: the restore and its failed precondition get one each.
    if (t.origin.resourceName === '/users/{id}:undelete' && (status === 200 || status === 412)) {
      const deleted = await createUser('Dredd, to restore');
      await call('DELETE', `/users/${deleted.id}`);
      withID(t, deleted.id);
    }
    if (status < 400) return;
    t.skip = !(await provoke[status](t));
  })().then(() => done(), (err) => {
    t.fail = `the hook could not set the transaction up: ${err.message}`;
    done();
  });
});

// A stream that stays open until the client leaves: Dredd waits for the end of an answer's body,
// so it cannot test one. handlers/watch_test.go and the contract checker test the stream.
hooks.before('/users/events > Watch users change, as Server-Sent Events > 200 > text/event-stream', (t) => {
  t.skip = true;
});

// The user is read again with its current entity tag: 304 without a body.
hooks.before('/users/{id} > Read a user > 304', (t, done) => {
  call('GET', t.fullPath).then((res) => {
    t.request.headers['If-None-Match'] = res.headers.get('ETag');
    done();
  }, (err) => {
    t.fail = err.message;
    done();
  });
});

hooks.before('/openapi.json > This document > 304', (t, done) => {
  call('GET', '/openapi.json').then((res) => {
    t.request.headers['If-None-Match'] = res.headers.get('ETag');
    done();
  }, (err) => {
    t.fail = err.message;
    done();
  });
});

// The delete of a subscription gets one of its own, as the delete of a user does.
hooks.before('/webhooks/{id} > End a webhook subscription > 204', (t, done) => {
  createWebhook().then((doomed) => {
    withID(t, doomed.id);
    done();
  }, (err) => {
    t.fail = err.message;
    done();
  });
});

// The delete gets a user of its own, so that the operations after it still have theirs.
hooks.before('/users/{id} > Delete a user > 204', (t, done) => {
  createUser('Dredd, to delete').then((doomed) => {
    withID(t, doomed.id);
    done();
  }, (err) => {
    t.fail = err.message;
    done();
  });
});
