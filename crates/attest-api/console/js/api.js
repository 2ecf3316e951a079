// The public HTTP API v1 of this origin, with the tab's API key (sessionStorage) as a bearer token.
// Errors come back as ApiError carrying the API's {error: {code, message, field}}; a 401 also fires
// `attest:auth` so the page can ask for a key.

const KEY = "attest.api-key";

export function apiKey() {
  return sessionStorage.getItem(KEY) || "";
}

export function setApiKey(key) {
  if (key) sessionStorage.setItem(KEY, key);
  else sessionStorage.removeItem(KEY);
}

export class ApiError extends Error {
  constructor(status, code, message, field) {
    super(message);
    this.status = status;
    this.code = code;
    this.field = field;
  }
}

function headers(extra) {
  const h = { Accept: "application/json", ...extra };
  const key = apiKey();
  if (key) h.Authorization = `Bearer ${key}`;
  return h;
}

async function failure(resp) {
  const text = await resp.text();
  let err = {};
  try {
    err = JSON.parse(text).error || {};
  } catch {
    err = { message: text };
  }
  if (resp.status === 401) window.dispatchEvent(new CustomEvent("attest:auth"));
  return new ApiError(resp.status, err.code || String(resp.status), err.message || resp.statusText, err.field);
}

// `body`: an object (sent as JSON) or a string with its `contentType`.
export async function api(method, path, body, contentType = "application/json") {
  const init = { method, headers: headers() };
  if (body !== undefined) {
    init.headers["Content-Type"] = contentType;
    init.body = typeof body === "string" ? body : JSON.stringify(body);
  }
  let resp;
  try {
    resp = await fetch(path, init);
  } catch (e) {
    throw new ApiError(0, "unreachable", `the API did not answer (${e.message})`);
  }
  if (!resp.ok) throw await failure(resp);
  const text = await resp.text();
  return text ? JSON.parse(text) : null;
}

// An upload with progress (fetch reports none): calls onProgress(sentBytes, totalBytes).
export function upload(path, body, contentType, onProgress) {
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest();
    xhr.open("POST", path);
    for (const [k, v] of Object.entries(headers({ "Content-Type": contentType }))) xhr.setRequestHeader(k, v);
    xhr.upload.onprogress = (e) => onProgress(e.loaded, e.total);
    xhr.onerror = () => reject(new ApiError(0, "unreachable", "the API did not answer"));
    xhr.onload = () => {
      if (xhr.status >= 200 && xhr.status < 300) return resolve(JSON.parse(xhr.responseText));
      let err = {};
      try {
        err = JSON.parse(xhr.responseText).error || {};
      } catch {
        err = { message: xhr.responseText };
      }
      if (xhr.status === 401) window.dispatchEvent(new CustomEvent("attest:auth"));
      reject(new ApiError(xhr.status, err.code || String(xhr.status), err.message || xhr.statusText, err.field));
    };
    xhr.send(body);
  });
}

// POSTs `body` and reads the answer as Server-Sent Events (EventSource cannot POST or send a key):
// calls onEvent(name, data) for each event as it arrives.
export async function stream(path, body, onEvent) {
  let resp;
  try {
    resp = await fetch(path, {
      method: "POST",
      headers: headers({ "Content-Type": "application/json", Accept: "text/event-stream" }),
      body: JSON.stringify(body),
    });
  } catch (e) {
    throw new ApiError(0, "unreachable", `the API did not answer (${e.message})`);
  }
  if (!resp.ok) throw await failure(resp);
  const reader = resp.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (value) buffer += decoder.decode(value, { stream: true });
    let end;
    while ((end = buffer.search(/\r?\n\r?\n/)) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end).replace(/^\r?\n\r?\n/, "");
      let name = "message";
      const data = [];
      for (const line of block.split(/\r?\n/)) {
        if (line.startsWith("event:")) name = line.slice(6).trim();
        else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
      }
      if (data.length) onEvent(name, JSON.parse(data.join("\n")));
    }
    if (done) return;
  }
}

export const enc = encodeURIComponent;
