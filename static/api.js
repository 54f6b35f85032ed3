// The JSON side of the streaming API (docs/api.md): start, cancel and inspect a generation.

/** A refusal from the API: its HTTP status and the contract's {"error": {code, message}}. */
export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.name = "ApiError";
    this.status = status;
    this.code = code;
  }
}

const generationsUrl = document.body?.dataset.generationsUrl || "/api/generations";

// Django's CSRF middleware wants the cookie's token echoed in a header on every POST.
function csrfToken() {
  const match = document.cookie.match(/(?:^|;\s*)csrftoken=([^;]+)/);
  if (match) return decodeURIComponent(match[1]);
  return document.querySelector('meta[name="csrf-token"]')?.content ?? "";
}

async function requestJson(method, url, body) {
  const headers = { Accept: "application/json" };
  if (method !== "GET") headers["X-CSRFToken"] = csrfToken();
  if (body !== undefined) headers["Content-Type"] = "application/json";
  let response;
  try {
    response = await fetch(url, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
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
  if (!response.ok) {
    const error = data?.error ?? {};
    throw new ApiError(response.status, error.code ?? `http_${response.status}`,
      error.message ?? `${response.status} ${response.statusText}`);
  }
  return data;
}

/** POST /api/generations → {id, stream_url, cancel_url}. */
export function createGeneration(body) {
  return requestJson("POST", generationsUrl, body);
}

/** POST the cancel_url: the server aborts the generation in its engine. */
export function cancelGeneration(cancelUrl) {
  return requestJson("POST", cancelUrl);
}

/** GET /api/generations/<id>: status, tokens_generated, ttft_ms, … */
export function fetchGeneration(id) {
  return requestJson("GET", `${generationsUrl}/${encodeURIComponent(id)}`);
}
