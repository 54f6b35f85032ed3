// The JSON side of the API (docs/api.md): generations (cancel, inspect), the engine's
// defaults, the person's conversations on the server (docs/conversations.md), and the files
// they attach (docs/files.md).

/** A refusal from the API: its HTTP status and the contract's {"error": {code, message}};
 * `details`, what else the error says, for the page to word (a budget's figures: `budget`). */
export class ApiError extends Error {
  constructor(status, code, message, details = {}) {
    super(message);
    this.name = "ApiError";
    this.status = status;
    this.code = code;
    this.details = details;
  }
}

const generationsUrl = document.body?.dataset.generationsUrl || "/api/generations";
const conversationsUrl = document.body?.dataset.conversationsUrl || "/api/conversations";
const filesUrl = "/v1/files";

// Django's CSRF middleware wants the cookie's token echoed in a header on every POST.
function csrfToken() {
  const match = document.cookie.match(/(?:^|;\s*)csrftoken=([^;]+)/);
  if (match) return decodeURIComponent(match[1]);
  return document.querySelector('meta[name="csrf-token"]')?.content ?? "";
}

/** `body`: a value sent as JSON; `raw`: JSON text sent as it is (a file's, unparsed here). */
async function requestJson(method, url, body, raw) {
  const headers = { Accept: "application/json" };
  if (method !== "GET") headers["X-CSRFToken"] = csrfToken();
  if (body !== undefined || raw !== undefined) headers["Content-Type"] = "application/json";
  let response;
  try {
    response = await fetch(url, {
      method,
      headers,
      body: raw ?? (body === undefined ? undefined : JSON.stringify(body)),
      credentials: "same-origin",
    });
  } catch (err) {
    throw new ApiError(0, "network_error", err.message || "Network error");
  }
  let data = null;
  try {
    data = await response.json();
  } catch {
    // A proxy's HTML error page or an empty 202: the status says enough.
  }
  if (!response.ok) throw refusal(response.status, response.statusText, data);
  return data;
}

/** The ApiError of a reply that is not a success: its body's {"error": {code, message, …}}. */
function refusal(status, statusText, data) {
  const { code, message, ...details } = data?.error ?? {};
  return new ApiError(status, code ?? `http_${status}`, message ?? `${status} ${statusText}`, details);
}

/** POST the cancel_url: the server aborts the generation in its engine. */
export function cancelGeneration(cancelUrl) {
  return requestJson("POST", cancelUrl);
}

/** GET /api/generations/<id>: status, tokens_generated, ttft_ms, … */
export function fetchGeneration(id) {
  return requestJson("GET", `${generationsUrl}/${encodeURIComponent(id)}`);
}

/** POST /api/generations/<id>/approvals: the person's yes or no to a tool call of the run
 * that waits for it (docs/tools.md, "Approvals") → 202 {call_id, approve}. */
export function decideToolCall(generationId, callId, approve) {
  return requestJson("POST", `${generationsUrl}/${encodeURIComponent(generationId)}/approvals`,
    { call_id: callId, approve });
}

/** GET /api/mcp_servers → {servers: [{name, available, tools: [{name, description,
 * requires_approval}]}]}: the MCP servers this person's answers may call. */
export function fetchMcpServers() {
  return requestJson("GET", "/api/mcp_servers");
}

/** GET /api/engine → {engine, model, defaults: {temperature, top_p, top_k, max_tokens, the
 * penalties}, capabilities: {penalties, …}, …}. */
export function fetchEngine() {
  return requestJson("GET", "/api/engine");
}

/** GET /api/usage?days=N → the person's own tokens: {since, totals, models, days: [{day, model,
 * total_tokens, …}], budgets: [{scope, period, tokens, used, left, resets_at}]}. */
export function fetchUsage(days) {
  return requestJson("GET", `/api/usage?days=${encodeURIComponent(days)}`);
}

/** GET /v1/models → {data: [{id, ready, default, …}]}: the models this person may use. */
export function fetchModels() {
  return requestJson("GET", "/v1/models");
}

// --- conversations ----------------------------------------------------------------------------

function conversationUrl(id, rest = "") {
  return `${conversationsUrl}/${encodeURIComponent(id)}${rest}`;
}

/** GET /api/conversations → {data: [conversation…], has_more}, newest first; `q` searches,
 * `before` (a conversation's id) asks for the page after it. */
export function listConversations({ q = "", before = null, limit = null } = {}) {
  const query = new URLSearchParams();
  if (q) query.set("q", q);
  if (before) query.set("before", before);
  if (limit) query.set("limit", String(limit));
  const suffix = query.size ? `?${query}` : "";
  return requestJson("GET", conversationsUrl + suffix);
}

/** POST /api/conversations {title?, system_prompt?, temperature?, top_p?, max_tokens?, the
 * penalties?}. */
export function createConversation(fields = {}) {
  return requestJson("POST", conversationsUrl, fields);
}

/** GET one conversation → it and a page of its branch shown: its last `items` (`limit`, the
 * server's 50 by default, 200 at most), or those before the item `before`; `has_earlier`. */
export function fetchConversation(id, { before = null, limit = null } = {}) {
  const query = new URLSearchParams();
  if (before) query.set("before", before);
  if (limit) query.set("limit", String(limit));
  return requestJson("GET", conversationUrl(id, query.size ? `?${query}` : ""));
}

/** PATCH its title and settings (a setting null: the engine's default) → the branch's last
 * page (as every reply below). */
export function updateConversation(id, fields) {
  return requestJson("PATCH", conversationUrl(id), fields);
}

/** DELETE it (its running answers are stopped). */
export function deleteConversation(id) {
  return requestJson("DELETE", conversationUrl(id));
}

/** POST a message {content, after?, files?} (`files`: the ids of the person's files it
 * attaches, in order) → the branch, ending with it and its answer (created, not started: its
 * `generation.stream_url` starts it). */
export function sendMessage(id, body) {
  return requestJson("POST", conversationUrl(id, "/messages"), body);
}

/** A new answer beside that one (its alternative) → the branch showing it. */
export function regenerateItem(id, itemId) {
  return requestJson("POST", conversationUrl(id, `/items/${encodeURIComponent(itemId)}/regenerate`));
}

/** Show the branch through that item (an alternative chosen) → the branch. */
export function showItem(id, itemId) {
  return requestJson("POST", conversationUrl(id, `/items/${encodeURIComponent(itemId)}/show`));
}

/** A new conversation with the branch up to that item and the same settings ("New chat from
 * here") → the new conversation. */
export function forkConversation(id, itemId) {
  return requestJson("POST", conversationUrl(id, `/items/${encodeURIComponent(itemId)}/fork`));
}

// --- files (docs/files.md) ---------------------------------------------------------------------

/** POST /v1/files (multipart: `file`, `purpose` user_data) → OpenAI's file object {id, bytes,
 * filename, …}. By XMLHttpRequest, as fetch() says nothing of an upload's progress:
 * `onProgress(sent, total)` as the bytes go, `onSent()` once all are sent (the server then
 * reads the file, before it answers). Returns {done: the promise of the file object (an
 * ApiError when refused; code `aborted` after abort()), abort}. */
export function uploadFile(file, { onProgress, onSent } = {}) {
  const xhr = new XMLHttpRequest();
  const done = new Promise((resolve, reject) => {
    xhr.upload.addEventListener("progress", (event) => {
      if (event.lengthComputable) onProgress?.(event.loaded, event.total);
    });
    xhr.upload.addEventListener("load", () => onSent?.());
    xhr.addEventListener("load", () => {
      const data = xhr.response; // null where the body is not JSON (a proxy's page)
      if (xhr.status >= 200 && xhr.status < 300 && data) resolve(data);
      else reject(refusal(xhr.status, xhr.statusText, data));
    });
    xhr.addEventListener("error", () => reject(new ApiError(0, "network_error", "Network error")));
    xhr.addEventListener("abort", () => reject(new ApiError(0, "aborted", "Aborted")));
  });
  const form = new FormData();
  form.append("purpose", "user_data");
  form.append("file", file);
  xhr.open("POST", filesUrl);
  xhr.responseType = "json";
  xhr.setRequestHeader("Accept", "application/json");
  xhr.setRequestHeader("X-CSRFToken", csrfToken());
  xhr.send(form);
  return { done, abort: () => xhr.abort() };
}

/** DELETE one of the person's files. */
export function deleteFile(id) {
  return requestJson("DELETE", `${filesUrl}/${encodeURIComponent(id)}`);
}

/** Where a file's bytes are read (an image's thumbnail). */
export function fileContentUrl(id) {
  return `${filesUrl}/${encodeURIComponent(id)}/content`;
}

// --- shared links (docs/conversations.md, "Sharing") -----------------------------------------

/** A read-only link to the branch shown, as it is now → {token, url, title, created_at, …}. */
export function shareConversation(id) {
  return requestJson("POST", conversationUrl(id, "/share"));
}

/** GET /api/shares → {data: [link…]}: the person's live links, newest first. */
export function listShares() {
  return requestJson("GET", "/api/shares");
}

/** Revoke a link: its page is a 404 from now on. */
export function revokeShare(token) {
  return requestJson("DELETE", `/api/shares/${encodeURIComponent(token)}`);
}

/** A copy of a shared link's snapshot, the person's own → the new conversation. */
export function continueShared(token) {
  return requestJson("POST", `/api/shares/${encodeURIComponent(token)}/continue`);
}

// --- export, import, feedback -----------------------------------------------------------------

/** Where one conversation downloads as `format` (`md` or `json`). */
export function exportUrl(id, format) {
  return conversationUrl(id, `/export?format=${encodeURIComponent(format)}`);
}

/** Where all the person's conversations download, as one JSON file. */
export const exportAllUrl = `${conversationsUrl}/export`;

/** POST an export file's text → {imported, ids}; all of it or nothing (ApiError
 * `invalid_import`, its message naming where). */
export function importConversations(text) {
  return requestJson("POST", `${conversationsUrl}/import`, undefined, text);
}

/** PUT {rating: 1 | -1, comment} on an answer (or change it); `null`: DELETE it. → {id, feedback}. */
export function rateAnswer(id, itemId, feedback) {
  const url = conversationUrl(id, `/items/${encodeURIComponent(itemId)}/feedback`);
  return feedback === null ? requestJson("DELETE", url) : requestJson("PUT", url, feedback);
}
