// The webhooks view: the subscriptions (where changes go, which ones, how far behind they are), the
// recent delivery attempts of one, and the forms that subscribe, pause, resume, rotate the secret
// and end. Every call needs a key that holds webhooks.manage, so the view reads nothing until it is
// opened; while it is open it reads again every few seconds, so that each subscription's lag is
// current without a reload.
import { timestampDate, type Duration, type Timestamp } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError } from "@connectrpc/connect";
import { describeError, webhooks } from "./api";
import type { Webhook, WebhookDelivery } from "./gen/users/v1/users_pb";

/** What the view needs of the page around it. */
export interface Page {
  /** Makes sure there is a key, asking for it once; false if the person cancels. */
  ensureKey(): Promise<boolean>;
  say(message: string): void;
  showError(message: string): void;
  /** Says that the key may have changed (a refused key is forgotten). */
  keyChanged(): void;
}

/** How often an open view reads the subscriptions again. */
const refreshEvery = 5_000;

const typePrefix = "dev.usersd.user.";

function element<T extends HTMLElement>(id: string): T {
  const found = document.getElementById(id);
  if (!found) throw new Error(`the page has no #${id}`);
  return found as T;
}

/** Says in words what went wrong with a call about subscriptions. */
function describe(err: unknown): string {
  switch (ConnectError.from(err).code) {
    case Code.PermissionDenied:
      return "This API key may not manage webhooks. Forget the key and use one that holds the webhooks.manage scope.";
    case Code.NotFound:
      return "That subscription no longer exists. The list has been refreshed.";
    default:
      return describeError(err);
  }
}

function formatTime(ts: Timestamp | undefined): string {
  return ts ? timestampDate(ts).toLocaleString() : "";
}

function formatDuration(d: Duration | undefined): string {
  const ms = d ? Number(d.seconds) * 1000 + d.nanos / 1e6 : 0;
  return ms < 1000 ? `${Math.round(ms)} ms` : `${(ms / 1000).toFixed(1)} s`;
}

/** What a subscription sends, in a few words. */
function sends(w: Webhook): string {
  const types = w.types.length ? w.types.map((t) => t.replace(typePrefix, "")).join(", ") : "every change";
  return w.role ? `${types}, of users with the role ${w.role}` : types;
}

/** Whether a subscription is sending, failing, paused or stopped, and why. */
function state(w: Webhook): string {
  if (!w.enabled) return w.disabledReason ? `Stopped: ${w.disabledReason}` : "Paused";
  if (w.failedAttempts > 0) return `Failing: ${w.failedAttempts} attempts, next at ${formatTime(w.nextAttemptTime)}`;
  return "Sending";
}

function behind(w: Webhook): string {
  const lag = w.latestSequence - w.deliveredSequence;
  return lag === 1n ? "1 change" : `${lag} changes`;
}

function cell(text: string, className = ""): HTMLTableCellElement {
  const td = document.createElement("td");
  td.textContent = text;
  if (className) td.className = className;
  return td;
}

function button(label: string, action: string, id: number, style: "secondary" | "danger"): HTMLButtonElement {
  const b = document.createElement("button");
  b.type = "button";
  b.className = style;
  b.textContent = label;
  b.dataset.action = action;
  b.dataset.id = String(id);
  return b;
}

export function startWebhooksView(page: Page): void {
  const ui = {
    details: element<HTMLDetailsElement>("webhooks"),
    rows: element<HTMLTableSectionElement>("webhook-rows"),
    form: element<HTMLFormElement>("webhook-form"),
    secret: element<HTMLParagraphElement>("webhook-secret"),
    deliveries: element<HTMLElement>("deliveries"),
    deliveriesHeading: element<HTMLHeadingElement>("deliveries-heading"),
    deliveryRows: element<HTMLTableSectionElement>("delivery-rows"),
  };
  /** The subscriptions as last drawn, by id. */
  let shown = new Map<number, Webhook>();
  /** The subscription whose deliveries are shown, if any. */
  let deliveriesOf: number | undefined;
  let timer: ReturnType<typeof setInterval> | undefined;

  function stop(): void {
    clearInterval(timer);
    timer = undefined;
  }

  function failed(err: unknown): void {
    page.keyChanged();
    page.showError(describe(err));
  }

  /** A read of the view failed: a refused key or a stopped service is not asked again every few seconds. */
  function readFailed(err: unknown): void {
    stop();
    failed(err);
  }

  async function load(): Promise<void> {
    const res = await webhooks.listWebhooks({});
    shown = new Map(res.webhooks.map((w) => [w.id, w]));
    ui.rows.replaceChildren(...res.webhooks.map(row));
    if (!res.webhooks.length) {
      const empty = cell("No subscriptions yet.", "empty");
      empty.colSpan = 6;
      ui.rows.replaceChildren(document.createElement("tr"));
      ui.rows.firstElementChild?.append(empty);
    }
    if (deliveriesOf !== undefined) {
      if (shown.has(deliveriesOf)) await loadDeliveries(deliveriesOf);
      else closeDeliveries();
    }
  }

  function row(w: Webhook): HTMLTableRowElement {
    const tr = document.createElement("tr");
    tr.dataset.id = String(w.id);
    const actions = document.createElement("td");
    actions.className = "actions";
    actions.append(
      button("Deliveries", "deliveries", w.id, "secondary"),
      button(w.enabled ? "Pause" : "Resume", w.enabled ? "pause" : "resume", w.id, "secondary"),
      button("New secret", "rotate", w.id, "secondary"),
      button("Delete", "delete", w.id, "danger"),
    );
    const lag = cell(behind(w), "behind");
    lag.title = `Delivered up to change ${w.deliveredSequence}; the newest change is ${w.latestSequence}`;
    tr.append(cell(String(w.id)), cell(w.url, "url"), cell(sends(w)), cell(state(w), "state"), lag, actions);
    return tr;
  }

  async function loadDeliveries(id: number): Promise<void> {
    const res = await webhooks.listWebhookDeliveries({ id });
    deliveriesOf = id;
    ui.deliveriesHeading.textContent = `Recent deliveries to ${shown.get(id)?.url ?? `subscription ${id}`}`;
    ui.deliveryRows.replaceChildren(...res.deliveries.map(deliveryRow));
    if (!res.deliveries.length) {
      const empty = cell("No attempts yet: nothing has changed since it was made.", "empty");
      empty.colSpan = 5;
      ui.deliveryRows.replaceChildren(document.createElement("tr"));
      ui.deliveryRows.firstElementChild?.append(empty);
    }
    ui.deliveries.hidden = false;
  }

  function deliveryRow(d: WebhookDelivery): HTMLTableRowElement {
    const tr = document.createElement("tr");
    const answer = d.status ? `${d.status}${d.error ? `: ${d.error}` : ""}` : d.error;
    tr.append(cell(String(d.sequence)), cell(answer, "answer"), cell(formatDuration(d.latency)), cell(formatTime(d.attemptTime)), cell(formatTime(d.nextAttemptTime)));
    return tr;
  }

  function closeDeliveries(): void {
    deliveriesOf = undefined;
    ui.deliveries.hidden = true;
    ui.deliveryRows.replaceChildren();
  }

  function showSecret(w: Webhook | undefined, what: string): void {
    if (!w) return;
    const code = document.createElement("code");
    code.textContent = w.secret;
    ui.secret.replaceChildren(`${what} Its signing secret, shown this once: `, code);
    ui.secret.hidden = false;
  }

  /** Runs an action on subscriptions with the key, then draws the list again. */
  async function act(action: () => Promise<void>): Promise<void> {
    if (!(await page.ensureKey())) {
      page.say("Nothing was changed: subscriptions need an API key that holds webhooks.manage.");
      return;
    }
    try {
      await action();
      await load();
    } catch (err) {
      failed(err);
      void load().catch(() => {});
    } finally {
      page.keyChanged();
    }
  }

  async function open(): Promise<void> {
    if (!(await page.ensureKey())) {
      page.say("The subscriptions need an API key that holds webhooks.manage.");
      ui.details.open = false;
      return;
    }
    try {
      await load();
    } catch (err) {
      readFailed(err);
      return;
    }
    stop();
    if (!ui.details.open) return; // closed while it was asked for the key or read
    timer = setInterval(() => {
      if (document.visibilityState === "visible") void load().catch(readFailed);
    }, refreshEvery);
  }

  ui.details.addEventListener("toggle", () => {
    if (ui.details.open) void open();
    else stop();
  });

  ui.form.addEventListener("submit", (event) => {
    event.preventDefault();
    const data = new FormData(ui.form);
    const url = String(data.get("url") ?? "").trim();
    const types = data.getAll("types").map(String);
    const role = String(data.get("role") ?? "").trim();
    void act(async () => {
      const res = await webhooks.createWebhook({ webhook: { url, types, role } });
      ui.form.reset();
      page.say(`Subscribed ${url} (subscription ${res.webhook?.id}).`);
      showSecret(res.webhook, `Subscription ${res.webhook?.id} sends to ${url}.`);
    });
  });

  ui.rows.addEventListener("click", (event) => {
    const target = (event.target as HTMLElement).closest<HTMLButtonElement>("button[data-action]");
    if (!target) return;
    const id = Number(target.dataset.id);
    const w = shown.get(id);
    switch (target.dataset.action) {
      case "deliveries":
        void loadDeliveries(id).then(() => ui.deliveriesHeading.focus(), failed);
        return;
      case "pause":
      case "resume": {
        const enabled = target.dataset.action === "resume";
        void act(async () => {
          await webhooks.updateWebhook({ id, webhook: { enabled }, updateMask: { paths: ["enabled"] } });
          page.say(enabled ? `Subscription ${id} sends again, from where it stopped.` : `Subscription ${id} is paused: changes wait for it.`);
        });
        return;
      }
      case "rotate":
        void act(async () => {
          const res = await webhooks.rotateWebhookSecret({ id });
          page.say(`Subscription ${id} has a new secret; the old one signs beside it for 24 hours.`);
          showSecret(res.webhook, `Subscription ${id}'s new secret replaces the old one within 24 hours.`);
        });
        return;
      case "delete":
        if (!window.confirm(`End the subscription of ${w?.url ?? id}? Nothing more will be sent to it.`)) return;
        void act(async () => {
          await webhooks.deleteWebhook({ id });
          if (deliveriesOf === id) closeDeliveries();
          page.say(`Subscription ${id} has ended.`);
        });
        return;
    }
  });
}
