// The page: a list of users (filter, search, sort, pages), one user with their posts, and the forms
// that create, edit and delete; below them, the webhooks view (webhooks.ts). Every call goes through the generated client in api.ts. The page
// follows the changes that anyone makes (WatchUsers) and shows them without a reload. What it shows
// (the query, the page, the open user) is in its URL, so that reload, Back and a link keep it.
import { timestampDate, type Timestamp } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError } from "@connectrpc/connect";
import { apiKey, describeError, followUsers, setAPIKey, users, type WatchState } from "./api";
import { startWebhooksView } from "./webhooks";
import { UserEvent_Kind, type User, type UserEvent } from "./gen/users/v1/users_pb";

type SortField = "id" | "name" | "role" | "createdAt";

/** What the list shows: the collection query (docs/API.md#the-routes). */
const query = { role: "", namePrefix: "", find: "", filter: "", showDeleted: false, sort: "id" as SortField, descending: false, page: 1, limit: 10 };
const sortFields: SortField[] = ["id", "name", "role", "createdAt"];
const pageSizes = [5, 10, 20, 50, 100];
/** The page of posts after those shown for the open user, or "" when all are shown. */
let morePosts = "";
/** Numbers each list load, so that an answer to a load that a newer one replaced is dropped. */
let listLoads = 0;
/** The user open in the detail panel, with the etag it was read at. */
let current: User | undefined;
/** The users in the list, by id, as it was last drawn: a change it already shows needs no reload. */
let shown = new Map<number, User>();
/**
 * The changes this page made in the last few seconds (see changeKey): it reloaded the list after
 * each, so their echo from the watch needs no second reload.
 */
const ownChanges = new Set<string>();
/** Whether a reload for changes is under way, and whether more changes came in the meantime. */
let reloading = false;
let reloadAgain = false;
/**
 * Writes of this page under way, and whether a change came in meanwhile. Such a change (often the
 * write's own echo, which can come before its answer) is shown by a reload once the write is done:
 * a reload before it would read without the write's consistency token, perhaps from a standby that
 * does not hold the write yet, and draw the list as it was.
 */
let writesUnderWay = 0;
let changedDuringWrite = false;

function element<T extends HTMLElement>(id: string): T {
  const found = document.getElementById(id);
  if (!found) throw new Error(`the page has no #${id}`);
  return found as T;
}

const ui = {
  status: element<HTMLParagraphElement>("status"),
  error: element<HTMLParagraphElement>("error"),
  filters: element<HTMLFormElement>("filters"),
  roleFilter: element<HTMLInputElement>("role-filter"),
  nameFilter: element<HTMLInputElement>("name-filter"),
  showDeleted: element<HTMLInputElement>("show-deleted"),
  find: element<HTMLInputElement>("find"),
  filter: element<HTMLInputElement>("filter"),
  pageSize: element<HTMLSelectElement>("page-size"),
  rows: element<HTMLTableSectionElement>("user-rows"),
  sortButtons: document.querySelectorAll<HTMLButtonElement>("button[data-sort]"),
  prev: element<HTMLButtonElement>("prev-page"),
  next: element<HTMLButtonElement>("next-page"),
  pageInfo: element<HTMLSpanElement>("page-info"),
  createForm: element<HTMLFormElement>("create-form"),
  detail: element<HTMLElement>("detail"),
  detailTitle: element<HTMLHeadingElement>("detail-title"),
  detailMeta: element<HTMLParagraphElement>("detail-meta"),
  editForm: element<HTMLFormElement>("edit-form"),
  deleteButton: element<HTMLButtonElement>("delete-user"),
  closeButton: element<HTMLButtonElement>("close-detail"),
  posts: element<HTMLOListElement>("posts"),
  morePosts: element<HTMLButtonElement>("more-posts"),
  postForm: element<HTMLFormElement>("post-form"),
  keyDialog: element<HTMLDialogElement>("key-dialog"),
  keyInput: element<HTMLInputElement>("key-input"),
  keyState: element<HTMLSpanElement>("key-state"),
  forgetKey: element<HTMLButtonElement>("forget-key"),
  createLabels: element<HTMLDivElement>("create-labels"),
  createAddLabel: element<HTMLButtonElement>("create-add-label"),
  editLabels: element<HTMLDivElement>("edit-labels"),
  editAddLabel: element<HTMLButtonElement>("edit-add-label"),
  live: element<HTMLSpanElement>("live"),
};

// ---- messages

function say(message: string): void {
  clearError();
  ui.status.textContent = message;
}

/** Hides the error of an earlier action: a later success must not be shown beside it. */
function clearError(): void {
  ui.error.hidden = true;
  ui.error.textContent = "";
}

function fail(err: unknown): void {
  showError(describeError(err));
}

function showError(message: string): void {
  ui.error.textContent = message;
  ui.error.dataset.from = "";
  ui.error.hidden = false;
  ui.status.textContent = "";
}

function formatTime(ts: Timestamp | undefined): string {
  return ts ? timestampDate(ts).toLocaleString() : "";
}

// ---- the API key

function showKeyState(): void {
  ui.keyState.textContent = apiKey() ? "API key set for this tab" : "No API key yet: you will be asked when one is needed";
  ui.forgetKey.hidden = !apiKey();
}

/** Makes sure there is a key before a write, asking for it once; false if the person cancels. */
function ensureKey(): Promise<boolean> {
  if (apiKey()) return Promise.resolve(true);
  ui.keyInput.value = "";
  ui.keyDialog.showModal();
  return new Promise((resolve) => {
    ui.keyDialog.addEventListener(
      "close",
      () => {
        const key = ui.keyDialog.returnValue === "save" ? ui.keyInput.value.trim() : "";
        setAPIKey(key);
        showKeyState();
        resolve(key !== "");
      },
      { once: true },
    );
  });
}

/** Runs a write: asks for the key first, reports a refusal in words, and refreshes the key state. */
async function write(action: () => Promise<void>): Promise<void> {
  if (!(await ensureKey())) {
    say("Nothing was changed: an API key is needed to make changes.");
    return;
  }
  writesUnderWay++;
  try {
    await action();
  } catch (err) {
    fail(err);
  } finally {
    showKeyState();
    writesUnderWay--;
    if (writesUnderWay === 0 && changedDuringWrite) {
      changedDuringWrite = false;
      void reloadForChanges();
    }
  }
}

// ---- the URL

/** Reads the query and the open user from the page's URL; what it does not name keeps its default. */
function readURL(): number | undefined {
  const params = new URLSearchParams(location.search);
  query.role = params.get("role") ?? "";
  query.namePrefix = params.get("q") ?? "";
  query.showDeleted = params.get("deleted") === "1";
  query.find = params.get("find") ?? "";
  query.filter = params.get("filter") ?? "";
  const sort = params.get("sort") ?? "id";
  query.descending = sort.startsWith("-");
  const field = sort.replace(/^-/, "") as SortField;
  query.sort = sortFields.includes(field) ? field : "id";
  query.page = Math.max(1, Number.parseInt(params.get("page") ?? "1", 10) || 1);
  const limit = Number.parseInt(params.get("limit") ?? "10", 10);
  query.limit = pageSizes.includes(limit) ? limit : 10;
  ui.roleFilter.value = query.role;
  ui.nameFilter.value = query.namePrefix;
  ui.showDeleted.checked = query.showDeleted;
  ui.find.value = query.find;
  ui.filter.value = query.filter;
  ui.pageSize.value = String(query.limit);
  const user = Number.parseInt(params.get("user") ?? "", 10);
  return user > 0 ? user : undefined;
}

/**
 * Puts what the page shows in its URL: a new history entry for a step the person took (Back undoes
 * it), or a replaced one for a correction the page made itself (the last page emptied).
 */
function writeURL(how: "push" | "replace" = "push"): void {
  const params = new URLSearchParams();
  if (query.role) params.set("role", query.role);
  if (query.namePrefix) params.set("q", query.namePrefix);
  if (query.showDeleted) params.set("deleted", "1");
  if (query.find) params.set("find", query.find);
  if (query.filter) params.set("filter", query.filter);
  if (query.sort !== "id" || query.descending) params.set("sort", (query.descending ? "-" : "") + query.sort);
  if (query.page > 1) params.set("page", String(query.page));
  if (query.limit !== 10) params.set("limit", String(query.limit));
  if (current) params.set("user", String(current.id));
  const search = params.size > 0 ? `?${params}` : "";
  if (search === location.search) return;
  const url = search || location.pathname;
  if (how === "push") history.pushState(null, "", url);
  else history.replaceState(null, "", url);
}

// ---- the list

async function loadList(): Promise<void> {
  const load = ++listLoads;
  try {
    const res = await users.listUsers({
      role: query.role,
      namePrefix: query.namePrefix,
      showDeleted: query.showDeleted,
      filter: listFilter(),
      sort: (query.descending ? "-" : "") + query.sort,
      page: query.page,
      limit: query.limit,
    });
    // Answers can arrive out of order (a quick sort, then a page change): only the newest counts.
    if (load !== listLoads) return;
    const pages = Math.max(1, Math.ceil(res.totalCount / query.limit));
    if (query.page > pages) {
      query.page = pages; // the last page emptied (a delete elsewhere): show the new last page
      writeURL("replace");
      return loadList();
    }
    renderRows(res.users);
    if (!ui.error.hidden && ui.error.dataset.from === "list") clearError();
    ui.pageInfo.textContent = `Page ${query.page} of ${pages} (${res.totalCount} ${res.totalCount === 1 ? "user" : "users"})`;
    ui.prev.disabled = query.page <= 1;
    ui.next.disabled = query.page >= pages;
    for (const button of ui.sortButtons) {
      const th = button.closest("th");
      const sorted = button.dataset.sort === query.sort;
      th?.setAttribute("aria-sort", sorted ? (query.descending ? "descending" : "ascending") : "none");
      button.dataset.direction = sorted ? (query.descending ? "desc" : "asc") : "";
    }
  } catch (err) {
    if (load !== listLoads) return;
    // A service that runs with -public-reads=false needs a key to read: ask for it, then load again.
    if (ConnectError.from(err).code === Code.Unauthenticated && !apiKey() && (await ensureKey())) return loadList();
    fail(err);
    ui.error.dataset.from = "list"; // cleared by the next list that loads
  }
}

/** An AIP-160 string literal: quoted, with its quotes and backslashes escaped. */
function quoted(text: string): string {
  return `"${text.replaceAll("\\", "\\\\").replaceAll('"', '\\"')}"`;
}

/**
 * The list's filter: "Find" looks a user up by login name or email (both compared ignoring case by
 * the service), "Filter" is an AIP-160 filter as typed; both hold when both are given.
 */
function listFilter(): string {
  const find = query.find ? `userName = ${quoted(query.find)} OR email = ${quoted(query.find)}` : "";
  if (find && query.filter) return `(${find}) AND (${query.filter})`;
  return find || query.filter;
}

function renderRows(list: User[]): void {
  shown = new Map(list.map((user) => [user.id, user]));
  const rows = list.map((user) => {
    const row = document.createElement("tr");
    row.dataset.userId = String(user.id);
    const nameCell: (string | HTMLElement)[] = [];
    if (user.deleteTime) {
      // A deleted user cannot be opened (every read of it is 404): it can only be restored.
      row.className = "deleted";
      const badge = document.createElement("span");
      badge.className = "badge";
      badge.textContent = `deleted · purged ${formatTime(user.purgeTime)}`;
      const undelete = document.createElement("button");
      undelete.type = "button";
      undelete.className = "link";
      undelete.textContent = "Undelete";
      undelete.setAttribute("aria-label", `Undelete ${user.name}`);
      undelete.addEventListener("click", () => undeleteUser(user));
      nameCell.push(user.name, badge, " ", undelete);
    } else {
      const open = document.createElement("button");
      open.type = "button";
      open.className = "link";
      open.textContent = user.name;
      open.setAttribute("aria-label", `Open ${user.name}`);
      open.addEventListener("click", () => void openUser(user.id));
      nameCell.push(open);
    }
    if (user.active === false) {
      const badge = document.createElement("span");
      badge.className = "badge";
      badge.textContent = "inactive";
      nameCell.push(badge);
    }
    const cells = [[String(user.id)], nameCell, [user.userName || "—"], [user.email || "—"], [user.role || "—"], [formatTime(user.createdAt)]];
    for (const content of cells) {
      const cell = document.createElement("td");
      cell.append(...content);
      row.append(cell);
    }
    return row;
  });
  if (rows.length === 0) {
    const row = document.createElement("tr");
    const cell = document.createElement("td");
    cell.colSpan = 6;
    cell.className = "empty";
    cell.textContent =
      query.role || query.namePrefix || query.find || query.filter
        ? "No user matches the filter."
        : "No users yet: create the first one below.";
    row.append(cell);
    rows.push(row);
  }
  ui.rows.replaceChildren(...rows);
}

/** Restores a deleted user, conditional on the version the list shows. */
function undeleteUser(user: User): void {
  void write(async () => {
    const restored = await users.undeleteUser({ id: user.id, etag: user.etag });
    madeHere(restored);
    say(`Restored ${restored.name}.`);
    await loadList();
  });
}

// ---- one user

async function openUser(id: number, how: "push" | "replace" | "none" = "push"): Promise<void> {
  try {
    current = await users.getUser({ id });
    renderUser(current);
    await loadPosts(id);
    ui.detail.hidden = false;
    ui.detailTitle.focus();
    if (how !== "none") writeURL(how);
  } catch (err) {
    fail(err);
    closeUser("replace");
    await loadList();
  }
}

function renderUser(user: User): void {
  ui.detailTitle.textContent = user.name;
  renderMeta(user);
  field(ui.editForm, "name").value = user.name;
  field(ui.editForm, "role").value = user.role;
  for (const name of identityFields) field(ui.editForm, name).value = user[name];
  checkbox(ui.editForm, "active").checked = user.active !== false;
  renderLabels(ui.editLabels, user.labels);
}

function renderMeta(user: User, note = ""): void {
  const state = user.active === false ? "inactive" : "active";
  ui.detailMeta.textContent = `User ${user.id} · ${state} · created ${formatTime(user.createdAt)} · updated ${formatTime(user.updatedAt)}${note}`;
}

/** Shows the first page of the user's posts, or with more, adds the next page to those shown. */
async function loadPosts(userId: number, more = false): Promise<void> {
  const res = await users.listUserPosts({ userId, limit: 20, pageToken: more ? morePosts : "" });
  morePosts = res.nextPageToken;
  ui.morePosts.hidden = morePosts === "";
  const items = res.posts.map((post) => {
    const item = document.createElement("li");
    const title = document.createElement("strong");
    title.textContent = post.title;
    const when = document.createElement("time");
    when.textContent = formatTime(post.createdAt);
    item.append(title, " ", when);
    if (post.body) {
      const body = document.createElement("p");
      body.textContent = post.body;
      item.append(body);
    }
    return item;
  });
  if (more) {
    ui.posts.append(...items);
    return;
  }
  if (items.length === 0) {
    const item = document.createElement("li");
    item.className = "empty";
    item.textContent = "No posts yet.";
    items.push(item);
  }
  ui.posts.replaceChildren(...items);
}

function closeUser(how: "push" | "replace" | "none" = "push"): void {
  current = undefined;
  ui.detail.hidden = true;
  if (how !== "none") writeURL(how);
}

/** Whether the edit form holds what the open user has: nothing typed that a redraw would lose. */
function formUnchanged(user: User): boolean {
  const typed = formUser(ui.editForm, ui.editLabels);
  return (
    (["name", "role", ...identityFields] as const).every((name) => typed[name] === user[name]) &&
    typed.active === (user.active !== false) &&
    sameLabels(typed.labels, user.labels)
  );
}

/** The text fields of the identity (issue 37), named as in User and in the forms. */
const identityFields = ["userName", "givenName", "familyName", "email", "externalId"] as const;

type Labels = { [key: string]: string };

/** What a create or edit form holds, as the user it sends: every writable field. */
function formUser(form: HTMLFormElement, labels: HTMLElement) {
  const user = {
    name: field(form, "name").value,
    role: field(form, "role").value,
    userName: "",
    givenName: "",
    familyName: "",
    email: "",
    externalId: "",
    active: checkbox(form, "active").checked,
    labels: readLabels(labels),
  };
  for (const name of identityFields) user[name] = field(form, name).value.trim();
  return user;
}

function sameLabels(a: Labels, b: Labels): boolean {
  const keys = Object.keys(a);
  return keys.length === Object.keys(b).length && keys.every((key) => b[key] === a[key]);
}

/** The labels the rows hold; a row with neither key nor value is left out, a half-filled one is sent for the service to judge. */
function readLabels(rows: HTMLElement): Labels {
  const labels: Labels = {};
  for (const row of rows.querySelectorAll<HTMLElement>(".label-row")) {
    const key = row.querySelector<HTMLInputElement>("input[name=label-key]")?.value.trim() ?? "";
    const value = row.querySelector<HTMLInputElement>("input[name=label-value]")?.value ?? "";
    if (key || value) labels[key] = value;
  }
  return labels;
}

function renderLabels(rows: HTMLElement, labels: Labels): void {
  rows.replaceChildren(...Object.keys(labels).sort().map((key) => labelRow(key, labels[key] ?? "")));
}

/** One label as a key and a value, each with its label, and a button that removes the row. */
function labelRow(key = "", value = ""): HTMLElement {
  const row = document.createElement("div");
  row.className = "label-row";
  const input = (name: string, text: string, initial: string, maxLength: number) => {
    const label = document.createElement("label");
    const box = document.createElement("input");
    box.name = name;
    box.value = initial;
    box.maxLength = maxLength;
    box.autocomplete = "off";
    label.append(text, " ", box);
    return { label, box };
  };
  const k = input("label-key", "Key", key, 63);
  const v = input("label-value", "Value", value, 256);
  const remove = document.createElement("button");
  remove.type = "button";
  remove.className = "secondary remove-label";
  remove.textContent = "Remove";
  const name = () => `Remove the label ${k.box.value.trim() || "without a key"}`;
  remove.setAttribute("aria-label", name());
  k.box.addEventListener("input", () => remove.setAttribute("aria-label", name()));
  remove.addEventListener("click", () => {
    const rows = row.parentElement;
    row.remove();
    rows?.closest("fieldset")?.querySelector<HTMLButtonElement>(".add-label")?.focus();
  });
  row.append(k.label, v.label, remove);
  return row;
}

function checkbox(form: HTMLFormElement, name: string): HTMLInputElement {
  const control = form.elements.namedItem(name);
  if (!(control instanceof HTMLInputElement) || control.type !== "checkbox") {
    throw new Error(`form #${form.id} has no checkbox ${name}`);
  }
  return control;
}

function field(form: HTMLFormElement, name: string): HTMLInputElement | HTMLTextAreaElement {
  const control = form.elements.namedItem(name);
  if (!(control instanceof HTMLInputElement || control instanceof HTMLTextAreaElement)) {
    throw new Error(`form #${form.id} has no field ${name}`);
  }
  return control;
}

// ---- changes made elsewhere

/** Names a change: the user's id and etag (new on every write), or the user's delete. */
function changeKey(user: { id: number; etag?: string }): string {
  return `${user.id} ${user.etag || "deleted"}`;
}

/** Notes a change this page made; kept a while only, as its echo may have come first, or never. */
function madeHere(user: { id: number; etag?: string }): void {
  const key = changeKey(user);
  ownChanges.add(key);
  setTimeout(() => ownChanges.delete(key), 10_000);
}

/**
 * Shows a change made elsewhere. The list is reloaded rather than patched: a change moves users
 * between pages, filters and sort positions, and changes the count; the server knows where they go.
 */
function applyChange(event: UserEvent): void {
  const user = event.user;
  if (!user || ownChanges.delete(changeKey(user))) return;
  if (event.kind === UserEvent_Kind.DELETED || event.kind === UserEvent_Kind.PURGED) {
    if (current?.id === user.id) {
      say(`${current.name} was deleted elsewhere.`);
      closeUser("replace");
    }
  } else {
    if (current?.id === user.id && current.etag !== user.etag) {
      if (formUnchanged(current)) {
        // Nothing typed: show the new version, which a save is then conditional on.
        current = user;
        renderUser(user);
        renderMeta(user, " · just changed elsewhere");
      } else {
        // Not redrawn under the person's typing: a save, conditional on the etag, is refused and
        // then shows the new version.
        renderMeta(current, " · changed elsewhere since you opened it");
      }
    }
    if (shown.get(user.id)?.etag === user.etag) return; // the list already shows this version
  }
  if (writesUnderWay > 0) {
    changedDuringWrite = true;
    return;
  }
  void reloadForChanges();
}

/** Reloads the list at once; changes that arrive meanwhile (a burst) share one more reload after it. */
async function reloadForChanges(): Promise<void> {
  if (reloading) {
    reloadAgain = true;
    return;
  }
  reloading = true;
  do {
    reloadAgain = false;
    await loadList(); // reports its own errors
  } while (reloadAgain);
  reloading = false;
}

function showLive(state: WatchState): void {
  ui.live.dataset.state = state;
  ui.live.textContent = { connecting: "Connecting…", live: "Live", retrying: "Reconnecting…" }[state];
}

// ---- wiring

/** Shows the list as query now says, and records the step in the URL. */
function listChanged(): void {
  writeURL();
  void loadList();
}

ui.filters.addEventListener("submit", (event) => {
  event.preventDefault();
  query.role = ui.roleFilter.value.trim();
  query.namePrefix = ui.nameFilter.value.trim();
  query.showDeleted = ui.showDeleted.checked;
  query.find = ui.find.value.trim();
  query.filter = ui.filter.value.trim();
  query.limit = Number(ui.pageSize.value);
  query.page = 1;
  listChanged();
});

ui.pageSize.addEventListener("change", () => ui.filters.requestSubmit());
ui.showDeleted.addEventListener("change", () => ui.filters.requestSubmit());

for (const button of ui.sortButtons) {
  button.addEventListener("click", () => {
    const field = button.dataset.sort as SortField;
    query.descending = query.sort === field ? !query.descending : false;
    query.sort = field;
    query.page = 1;
    listChanged();
  });
}

ui.prev.addEventListener("click", () => {
  query.page = Math.max(1, query.page - 1);
  listChanged();
});

ui.next.addEventListener("click", () => {
  query.page += 1;
  listChanged();
});

ui.morePosts.addEventListener("click", () => {
  if (current) void loadPosts(current.id, true).catch(fail);
});

// Back and Forward: show what the URL of that step says.
window.addEventListener("popstate", () => {
  const user = readURL();
  void loadList();
  if (user === undefined) closeUser("none");
  else if (user !== current?.id) void openUser(user, "none");
});

ui.createForm.addEventListener("submit", (event) => {
  event.preventDefault();
  const user = formUser(ui.createForm, ui.createLabels);
  void write(async () => {
    // One key per submission: a retry after a dropped connection cannot create the user twice.
    const res = await users.createUser({ user, requestId: crypto.randomUUID() });
    if (res.user) madeHere(res.user);
    ui.createForm.reset();
    ui.createLabels.replaceChildren();
    say(`Created ${res.user?.name} (user ${res.user?.id}).`);
    await loadList();
    if (res.user) await openUser(res.user.id);
  });
});

ui.editForm.addEventListener("submit", (event) => {
  event.preventDefault();
  const user = current;
  if (!user) return;
  // Every writable field is sent (ReplaceUser): a label removed from the rows is removed.
  const edited = formUser(ui.editForm, ui.editLabels);
  void write(async () => {
    try {
      // The etag makes the save conditional: it fails if someone else saved in between.
      const res = await users.replaceUser({ id: user.id, user: edited, etag: user.etag });
      current = res.user;
      if (current) {
        madeHere(current);
        renderUser(current);
      }
      say(`Saved ${current?.name}.`);
      await loadList();
    } catch (err) {
      fail(err);
      if (current) await openUser(current.id); // show what is stored now, beside the message
    }
  });
});

ui.deleteButton.addEventListener("click", () => {
  const user = current;
  if (!user || !window.confirm(`Delete ${user.name} and all of their posts?`)) return;
  void write(async () => {
    const res = await users.deleteUser({ id: user.id, etag: user.etag });
    madeHere(res.user ?? { id: user.id });
    closeUser("replace");
    // A deleted user stays restorable until its purge time, when the server keeps deleted users.
    say(res.user ? `Deleted ${user.name}; "Deleted users too" lists them, to undelete until ${formatTime(res.user.purgeTime)}.` : `Deleted ${user.name}.`);
    await loadList();
  });
});

ui.closeButton.addEventListener("click", () => closeUser());

for (const [button, rows] of [
  [ui.createAddLabel, ui.createLabels],
  [ui.editAddLabel, ui.editLabels],
] as const) {
  button.addEventListener("click", () => {
    const row = labelRow();
    rows.append(row);
    row.querySelector("input")?.focus();
  });
}

ui.postForm.addEventListener("submit", (event) => {
  event.preventDefault();
  const user = current;
  if (!user) return;
  const title = field(ui.postForm, "title").value;
  const body = field(ui.postForm, "body").value;
  void write(async () => {
    await users.createUserPost({ userId: user.id, post: { title, body }, requestId: crypto.randomUUID() });
    ui.postForm.reset();
    say(`Added the post “${title}”.`);
    await loadPosts(user.id);
  });
});

ui.forgetKey.addEventListener("click", () => {
  setAPIKey("");
  showKeyState();
  say("The API key was forgotten.");
});

showKeyState();
startWebhooksView({ ensureKey, say, showError, keyChanged: showKeyState });
const openAtStart = readURL();
void loadList();
if (openAtStart !== undefined) void openUser(openAtStart, "none");
// A watch from now reloads the list once it has started: what changed before is in that load.
void followUsers({ change: applyChange, fresh: () => void loadList(), state: showLive });
