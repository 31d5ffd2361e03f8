// The service, as the page reaches it: the generated Users and Webhooks clients on Connect over
// fetch, with the API key (asked for once, kept for the browser tab) sent on every call.
import { Code, ConnectError, createClient, type Interceptor } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-web";
import { MethodOptions_IdempotencyLevel } from "@bufbuild/protobuf/wkt";
import { Users, UserEvent_Kind, Webhooks, type UserEvent } from "./gen/users/v1/users_pb";

const keyStorage = "usersd.apiKey";

/** The API key of this tab, or "" until the person gives one. */
export function apiKey(): string {
  return sessionStorage.getItem(keyStorage) ?? "";
}

export function setAPIKey(key: string): void {
  if (key) sessionStorage.setItem(keyStorage, key);
  else sessionStorage.removeItem(keyStorage);
}

/**
 * Sends the key, once there is one, on every call: writes need it, and reads need it too on a
 * service that runs with -public-reads=false (a public read with a key is served as without one).
 */
const sendKey: Interceptor = (next) => async (req) => {
  if (apiKey()) req.header.set("x-api-key", apiKey());
  try {
    return await next(req);
  } catch (err) {
    // A refused key is forgotten, so that the next write (or read, where reads need one) asks for it again.
    if (ConnectError.from(err).code === Code.Unauthenticated) setAPIKey("");
    throw err;
  }
};

const tokenStorage = "usersd.consistencyToken";

/**
 * Read your writes: every write answers a Consistency-Token, and every read sends back the token of
 * this tab's last write, so that a read served by a read standby still shows what this person just
 * changed (docs/POSTGRESQL.md#read-replicas). The token is opaque: it is kept as it came.
 */
const readYourWrites: Interceptor = (next) => async (req) => {
  const reads = req.method.idempotency === MethodOptions_IdempotencyLevel.NO_SIDE_EFFECTS;
  const token = sessionStorage.getItem(tokenStorage);
  if (reads && token) req.header.set("Consistency-Token", token);
  const res = await next(req);
  const answered = res.header.get("Consistency-Token");
  if (!reads && answered) sessionStorage.setItem(tokenStorage, answered);
  return res;
};

const transport = createConnectTransport({ baseUrl: window.location.origin, interceptors: [sendKey, readYourWrites] });

export const users = createClient(Users, transport);

/** The webhook subscriptions: every method needs a key that holds webhooks.manage. */
export const webhooks = createClient(Webhooks, transport);

/** What the page's watch of the changes is doing, for its "live" indicator. */
export type WatchState = "connecting" | "live" | "retrying";

/** No message for this long means a connection that died without saying so: heartbeats come every 15 s. */
const silenceLimit = 45_000;

/**
 * Follows WatchUsers for as long as the page is open, and hands each change to `change`. A stream
 * that starts from now calls `fresh` first: changes made before it are not sent, so the caller
 * reloads what it shows. A stream that ends (the server stops, or this page fell behind) is resumed
 * after the last sequence read, so nothing is lost or seen twice; a resume point the server no
 * longer keeps (failed_precondition) starts from now again, and so reloads.
 */
export async function followUsers(on: {
  change(event: UserEvent): void;
  fresh(): void;
  state(state: WatchState): void;
}): Promise<never> {
  let after: bigint | undefined; // the last sequence read; unset: from now
  let delay = 1_000;
  on.state("connecting");
  for (;;) {
    const silent = new AbortController();
    let timer = setTimeout(() => silent.abort(), silenceLimit);
    try {
      for await (const event of users.watchUsers({ afterSequence: after }, { signal: silent.signal })) {
        clearTimeout(timer);
        timer = setTimeout(() => silent.abort(), silenceLimit);
        if (after === undefined) on.fresh(); // the first message, a heartbeat where the stream starts
        after = event.sequence;
        delay = 1_000;
        on.state("live");
        if (event.kind !== UserEvent_Kind.HEARTBEAT) on.change(event);
      }
    } catch (err) {
      if (ConnectError.from(err).code === Code.FailedPrecondition) after = undefined;
    } finally {
      clearTimeout(timer);
    }
    on.state("retrying");
    // Every page that watched a stopped server comes back at once: the random half spreads them out.
    await new Promise((resume) => setTimeout(resume, delay * (0.5 + Math.random() / 2)));
    delay = Math.min(delay * 2, 10_000);
  }
}

/** Says in words what went wrong with a call, for the person using the page. */
export function describeError(err: unknown): string {
  const e = ConnectError.from(err);
  const detail = e.rawMessage ? ` (${e.rawMessage})` : "";
  switch (e.code) {
    case Code.Unauthenticated:
      return "The service did not accept the API key. Enter a valid key and try again.";
    case Code.PermissionDenied:
      return `This API key may not do that${detail}: a read-only key (users.read) can look but not change. Forget the key and use one with the users.write scope.`;
    case Code.ResourceExhausted:
      return `Too many requests${detail}. Wait a few seconds and try again.`;
    case Code.InvalidArgument:
      return `The service refused the input${detail}.`;
    case Code.AlreadyExists:
      return `Another user already has that value${detail}. Choose another and try again.`;
    case Code.NotFound:
      return "That user no longer exists. The list has been refreshed.";
    case Code.Aborted:
      return "Someone changed this user after you opened it. It has been reloaded: check it and save again.";
    case Code.FailedPrecondition:
      return `The request conflicts with an earlier one${detail}.`;
    case Code.Unavailable:
      return "The service is temporarily unavailable. Try again in a moment.";
    case Code.DeadlineExceeded:
      return "The service took too long to answer. Try again.";
    case Code.Canceled:
      return "The request was cancelled.";
    default:
      return `Something went wrong${detail}. Try again; if it keeps happening, tell the team that runs usersd.`;
  }
}
