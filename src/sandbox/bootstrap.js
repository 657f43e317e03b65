// The sandbox prelude: runs once per runtime (or once into the snapshot runtimes are
// restored from), before the model's code.
//
// It takes what it needs from deno_core (the sdkbox ops and the timer functions), installs
// `console`, `fetch`, `api`, timers and a few web basics, and leaves `__sdkbox_seal()`,
// which the Rust side calls next: it removes every way back to deno_core's internals and the
// engine globals a script has no use for, and returns the harness that runs the model's
// module.
//
// Nothing here is a security boundary: every limit is enforced in Rust. A script that
// breaks these helpers only breaks its own call.
"use strict";
(() => {
  const core = globalThis.Deno.core;
  const { op_sdkbox_log, op_sdkbox_http, op_sdkbox_call, op_sdkbox_result, op_sdkbox_test_crash } =
    core.ops;
  // Replaced with `true` by the Rust side only in workers started for crash tests.
  const testCrash = /*SDKBOX_TEST_CRASH*/ false;
  const { createTimer, cancelTimer } = core;
  const reportRejection = core.reportUnhandledPromiseRejection;
  const ErrorIsError = Error.isError;
  const ErrorCtor = Error;
  const DOMExceptionCtor = globalThis.DOMException;
  // The model's module (source.rs MODULE_URL); the harness imports it, so that whatever its
  // top-level code throws is caught here too.
  const MODULE_URL = "file:///code.ts";
  // The module that runs the entry at most once (entry.rs GUARD_URL).
  const GUARD_URL = "sdkbox:entry";
  const JSONStringify = JSON.stringify;
  const JSONParse = JSON.parse;
  const ObjectEntries = Object.entries;
  const ObjectAssign = Object.assign;
  const ObjectCreate = Object.create;
  const ObjectHasOwn = Object.hasOwn;
  const FunctionPrototype = Function.prototype;
  const SymbolToPrimitive = Symbol.toPrimitive;
  const SymbolIterator = Symbol.iterator;
  const SymbolAsyncIterator = Symbol.asyncIterator;
  const ObjectFreeze = Object.freeze;
  const ObjectDefineProperty = Object.defineProperty;
  const ArrayIsArray = Array.isArray;
  const NumberIsInteger = Number.isInteger;
  const MAX_DEPTH = 64;
  // The web platform web.js installed just before: the classes as it made them (a script
  // that replaces a global does not change what `fetch` and `api` read), and its internals.
  const web = globalThis.__sdkbox_web;
  const { internal, extractBody, responseFrom, concatBytes, viewBytes } = web;
  const { Headers, URLSearchParams, Blob, File, FormData, Request, URL } = globalThis;
  const EMPTY = new Uint8Array(0);
  const encodeUtf8 = (text) => core.encode(String(text));

  // ---- values to JSON, never throwing ------------------------------------------------

  function describeFunction(f) {
    // An SDK node answers every property with a deeper name: its own is in `operations`.
    const op = operations.get(f);
    if (op) return `[Function: ${sdkName(op)}]`;
    return `[Function: ${f.name || "anonymous"}]`;
  }

  // An SDK method's name as a script writes it: `api.customers.list`.
  function sdkName(op) {
    return `api.${op.group === "" ? op.method : `${op.group}.${op.method}`}`;
  }

  // Turns any value into plain JSON data: BigInt to string, cycles, functions, symbols and
  // promises to markers, Map/Set to objects/arrays, errors to {name, message, stack}.
  function toPlain(value, ancestors, depth) {
    switch (typeof value) {
      case "undefined":
        return undefined;
      case "bigint":
        return value.toString();
      case "function":
        return describeFunction(value);
      case "symbol":
        return `[${value.toString()}]`;
      case "number":
        return Number.isFinite(value) ? value : String(value);
      case "string":
      case "boolean":
        return value;
    }
    if (value === null) return null;
    if (ancestors.includes(value)) return "[Circular]";
    if (depth >= MAX_DEPTH) return "[MaxDepth]";
    try {
      if (value instanceof Promise) return "[Promise: add `await`]";
      if (value instanceof Blob) return returnedFile(value);
      if (value instanceof Error) {
        return { name: value.name, message: value.message, stack: value.stack };
      }
      if (typeof value.toJSON === "function") {
        return toPlain(value.toJSON(), ancestors, depth + 1);
      }
      ancestors.push(value);
      try {
        if (value instanceof Map) {
          const out = {};
          for (const [k, v] of value) out[String(k)] = toPlain(v, ancestors, depth + 1);
          return out;
        }
        if (value instanceof Set || ArrayBuffer.isView(value) || ArrayIsArray(value)) {
          const out = [];
          for (const v of ArrayIsArray(value) ? value : Array.from(value)) {
            const p = toPlain(v, ancestors, depth + 1);
            out.push(p === undefined ? null : p);
          }
          return out;
        }
        const out = {};
        for (const [k, v] of ObjectEntries(value)) {
          const p = toPlain(v, ancestors, depth + 1);
          if (p !== undefined) out[k] = p;
        }
        return out;
      } finally {
        ancestors.pop();
      }
    } catch (e) {
      return `[Unserializable: ${e && e.message}]`;
    }
  }

  // The files a result holds (Blobs and Files, `sdkbox.file(...)`), collected while it is
  // turned into JSON: each goes to the client as a file, and the JSON names it in its place.
  let returned = null;
  const MAX_RETURNED_FILES = 20;
  function returnedFile(blob) {
    const name = (blob instanceof File ? blob.name : `file-${(returned?.length ?? 0) + 1}`).slice(0, MAX_NAME);
    const type = (blob.type || "application/octet-stream").slice(0, MAX_NAME);
    const shown = { sdkbox_file: name, type, size: blob.size };
    if (returned === null) return `[${blob instanceof File ? "File" : "Blob"}: ${name}, ${type}, ${blob.size} bytes]`;
    if (returned.length >= MAX_RETURNED_FILES) {
      return { ...shown, error: `not sent: a result carries at most ${MAX_RETURNED_FILES} files` };
    }
    returned.push({ name, type, bytes: blob[internal] });
    return shown;
  }

  function toJson(value) {
    const plain = toPlain(value, [], 0);
    return JSONStringify(plain === undefined ? null : plain);
  }

  // The result as JSON, and the files it holds.
  function resultOf(value) {
    returned = [];
    try {
      return { json: toJson(value), files: returned };
    } finally {
      returned = null;
    }
  }

  // ---- console -----------------------------------------------------------------------

  function inspect(value) {
    if (typeof value === "string") return value;
    if (value instanceof Error) return value.stack || `${value.name}: ${value.message}`;
    if (value === undefined) return "undefined";
    if (typeof value === "function") return describeFunction(value);
    if (typeof value === "bigint") return `${value}n`;
    if (typeof value === "symbol") return value.toString();
    try {
      return JSONStringify(toPlain(value, [], 0)) ?? String(value);
    } catch {
      return String(value);
    }
  }

  function logger(level) {
    return (...args) => op_sdkbox_log(level, args.map(inspect).join(" "));
  }

  const console = {
    log: logger("log"),
    info: logger("info"),
    warn: logger("warn"),
    error: logger("error"),
    debug: logger("debug"),
    trace: logger("debug"),
    dir: logger("log"),
    table: logger("log"),
    assert: (ok, ...args) => {
      if (!ok) op_sdkbox_log("error", ["Assertion failed", ...args].map(inspect).join(" "));
    },
  };

  // ---- timers: they die with the runtime at the end of the call -------------------------

  const timers = new Map();
  let nextTimer = 1;
  function schedule(callback, delay, args, repeat) {
    if (typeof callback !== "function") throw new TypeError("timer callback must be a function");
    const id = nextTimer++;
    const run = () => {
      if (!repeat) timers.delete(id);
      try {
        callback(...args);
      } catch (thrown) {
        throw asError(thrown);
      }
    };
    timers.set(id, createTimer(run, delay, undefined, repeat, true));
    return id;
  }
  function clear(id) {
    const timer = timers.get(id);
    if (timer !== undefined) {
      timers.delete(id);
      cancelTimer(timer);
    }
  }

  // ---- the network: one op, checked and sent by Rust ----------------------------------

  class EgressError extends Error {
    constructor(kind, message) {
      super(message);
      this.name = "EgressError";
      this.kind = kind;
    }
  }

  // A request the approval rules or a human refused, or whose approval is still to come
  // (`kind` "approval_required": show the user the link in the message, then run the same
  // code again). Nothing was sent.
  class PolicyError extends EgressError {
    constructor(kind, message) {
      super(kind, message);
      this.name = "PolicyError";
    }
  }

  function refusal(error) {
    const policy = error.kind === "policy" || error.kind === "approval_required";
    return policy ? new PolicyError(error.kind, error.message) : new EgressError(error.kind, error.message);
  }


  // What a raw request's body is sent as: bytes, with the content type it implies when the
  // script gave none (bytes without a type of their own are declared as bytes,
  // application/octet-stream). A string is sent as it is (no type added); a plain object as
  // JSON.
  function rawBody(body, headers) {
    if (body === undefined || body === null) return null;
    if (typeof body === "string") return encodeUtf8(body);
    if (body instanceof URLSearchParams || body instanceof Blob || body instanceof FormData
        || body instanceof ArrayBuffer || ArrayBuffer.isView(body)) {
      const extracted = extractBody(body);
      const type = extracted.type ?? (extracted.bytes ? "application/octet-stream" : null);
      if (type && !hasHeader(headers, "content-type")) headers.push(["content-type", type.replace(";charset=UTF-8", "")]);
      return extracted.bytes ?? encodeUtf8(extracted.text);
    }
    if (!hasHeader(headers, "content-type")) headers.push(["content-type", "application/json"]);
    return encodeUtf8(JSONStringify(body));
  }

  // Files one call or result carries at most, and the characters of a name or type kept
  // (Rust holds both again).
  const MAX_FILES = 64;
  const MAX_NAME = 256;

  // `value` with every file in it (a Blob, a File, bytes) replaced by the mark that stands for
  // it (`{"$sdkbox_file": n}`, egress/binary.rs), each pushed to `files`. Only plain objects
  // and arrays are looked into.
  function withFiles(value, files, depth) {
    if (value === null || typeof value !== "object") return value;
    const blob = value instanceof Blob;
    if (blob || value instanceof ArrayBuffer || ArrayBuffer.isView(value)) {
      if (files.length >= MAX_FILES) {
        throw new TypeError(`a call takes at most ${MAX_FILES} files (Blob, File or bytes); send them in several calls`);
      }
      files.push({
        name: value instanceof File ? value.name.slice(0, MAX_NAME) : undefined,
        type: blob ? value.type.slice(0, MAX_NAME) : undefined,
        bytes: blob ? value[internal] : viewBytes(value),
      });
      return { $sdkbox_file: files.length - 1 };
    }
    if (depth >= MAX_DEPTH) return value;
    if (ArrayIsArray(value)) {
      let changed = false;
      const out = value.map((item) => {
        const replaced = withFiles(item, files, depth + 1);
        changed ||= replaced !== item;
        return replaced;
      });
      return changed ? out : value;
    }
    const proto = Object.getPrototypeOf(value);
    if (proto !== Object.prototype && proto !== null) return value;
    let changed = false;
    const out = {};
    for (const [k, v] of ObjectEntries(value)) {
      const replaced = withFiles(v, files, depth + 1);
      changed ||= replaced !== v;
      out[k] = replaced;
    }
    return changed ? out : value;
  }

  // What an op takes besides its JSON: the raw body's bytes (when `body` is not null), then
  // each file's, one after another, and the layout that says where each ends.
  function packed(body, files) {
    const layout = {
      body: body === null ? null : body.byteLength,
      files: files.map((f) => ({ name: f.name, type: f.type, size: f.bytes.byteLength })),
    };
    const parts = body === null ? [] : [body];
    for (const f of files) parts.push(f.bytes);
    return { layout, payload: parts.length === 0 ? EMPTY : parts.length === 1 ? parts[0] : concatBytes(parts) };
  }

  async function http(request, body = null, files = []) {
    const { layout, payload } = packed(body, files);
    const reply = await op_sdkbox_http(request, layout, payload);
    if (reply.error) throw refusal(reply.error);
    return reply.response;
  }

  function headerPairs(init) {
    if (init == null) return [];
    if (init instanceof Headers) return [...init];
    const entries = ArrayIsArray(init) ? init : ObjectEntries(init);
    return entries.map(([k, v]) => [String(k), String(v)]);
  }

  function hasHeader(pairs, name) {
    return pairs.some(([k]) => k.toLowerCase() === name);
  }

  // fetch as Deno and Workers have it, to the provider's origins only. `init.signal` aborts it:
  // before it leaves, nothing is sent; after, the answer is not waited for.
  async function fetch(input, init = {}) {
    const from = input instanceof Request ? input : null;
    const url = from ? from.url : input instanceof URL ? input.href : typeof input === "string" ? input : String(input?.url ?? input);
    const signal = init.signal ?? from?.signal ?? null;
    signal?.throwIfAborted();
    const headers = headerPairs(init.headers ?? from?.headers);
    let body;
    if (init.body !== undefined) {
      body = rawBody(init.body, headers);
    } else if (from && from[internal](false) !== null) {
      body = await from.bytes();
    } else {
      body = null;
    }
    const method = String(init.method ?? from?.method ?? "GET");
    const sent = http({ method, url, kind: "fetch", headers }, body);
    if (signal === null) return responseFrom(await sent);
    let onAbort;
    const aborted = new Promise((_, reject) => {
      onAbort = () => reject(signal.reason);
      signal.addEventListener("abort", onAbort, { once: true });
    });
    // The request goes on in Rust if it has left; its answer is dropped.
    sent.catch(() => {});
    try {
      return responseFrom(await Promise.race([sent, aborted]));
    } finally {
      signal.removeEventListener("abort", onAbort);
    }
  }

  // ---- api: the provider client ---------------------------------------------------------

  class ApiError extends Error {
    constructor(status, what, body, challenge) {
      const detail = providerMessage(body);
      let message = `${what} failed with HTTP ${status}${detail ? `: ${detail}` : ""}`;
      // RFC 6750: the scope the provider wants, when it says so.
      const scope = /insufficient_scope/.test(challenge ?? "") ? /scope="([^"]*)"/.exec(challenge)?.[1] : undefined;
      if (status === 401) message += " (hint: the provider rejected the credentials: a wrong or missing API key in sdkbox's configuration, or an expired or revoked linked account)";
      else if (status === 403 && scope) message += ` (hint: the provider token lacks the scope "${scope}". With a provider account linked through sdkbox, the user unlinks it on sdkbox's /link page and links again granting "${scope}"; else the API key lacks it)`;
      else if (status === 403) message += " (hint: the API key lacks the permission or scope for this operation)";
      super(message);
      this.name = "ApiError";
      this.status = status;
      this.body = body;
    }
  }

  function providerMessage(body) {
    if (body == null) return "";
    if (typeof body === "string") return body.slice(0, 300);
    const e = body.error ?? body.errors ?? body;
    if (typeof e === "string") return e;
    if (ArrayIsArray(e)) return e.map((x) => x?.message ?? JSONStringify(x)).join("; ").slice(0, 300);
    return String(e.message ?? body.message ?? JSONStringify(body)).slice(0, 300);
  }

  // {a: 1, tags: ["x", "y"], meta: {k: "v"}} -> a=1&tags=x&tags=y&meta[k]=v
  function queryPairs(query, prefix, out) {
    if (query == null) return out;
    if (query instanceof URLSearchParams) {
      for (const [k, v] of query) out.push([prefix ? `${prefix}[${k}]` : k, v]);
      return out;
    }
    for (const [k, v] of ObjectEntries(query)) {
      const key = prefix ? `${prefix}[${k}]` : k;
      if (v === undefined || v === null) continue;
      if (ArrayIsArray(v)) {
        for (const item of v) out.push([key, String(item)]);
      } else if (typeof v === "object" && !(v instanceof Date)) {
        queryPairs(v, key, out);
      } else {
        out.push([key, v instanceof Date ? v.toISOString() : String(v)]);
      }
    }
    return out;
  }

  // Media types whose bodies are text: what an SDK call returns as a string.
  const TEXT_TYPE = /^text\/|json|xml|javascript|ecmascript|x-www-form-urlencoded|yaml|csv|graphql|html/i;

  // What an SDK call or `api.request` returns: JSON parsed, text as a string, and anything
  // else a successful response carries (a PDF, an image, an archive) as a Blob of its bytes.
  function parseBody(raw) {
    const type = raw.headers.find(([k]) => k === "content-type")?.[1] ?? "";
    const bytes = raw.bytes;
    if (bytes === undefined ? raw.body === "" : bytes.byteLength === 0) return null;
    // Bytes (the spec says the operation returns a file, or they are not UTF-8) and a media
    // type that is no text are a Blob; anything else is text or JSON.
    const text = type === "" || TEXT_TYPE.test(type);
    if (raw.status < 400 && (bytes !== undefined || !text)) return new Blob([bytes ?? raw.body], { type });
    if (bytes !== undefined) return new TextDecoder().decode(bytes);
    if (type.includes("json")) {
      try {
        return JSONParse(raw.body);
      } catch {
        return raw.body;
      }
    }
    return raw.body;
  }

  function settle(raw, what) {
    const parsed = parseBody(raw);
    if (raw.status >= 400) {
      const challenge = raw.headers.find(([k]) => k === "www-authenticate")?.[1];
      throw new ApiError(raw.status, what, parsed, challenge);
    }
    return parsed;
  }

  // The generic call, kept for anything a generated SDK lacks.
  // Its query and an object body are also handed over as given, so that Rust encodes them
  // as the operation they reach expects (a form for Stripe, `expand[]`); a string,
  // URLSearchParams or an explicit content type is sent as it is.
  async function request(method, path, options = {}) {
    const headers = headerPairs(options.headers);
    if (!hasHeader(headers, "accept")) headers.push(["accept", "application/json"]);
    const given = options.body;
    const sentAsIs = given instanceof URLSearchParams || given instanceof Blob || given instanceof FormData
      || given instanceof ArrayBuffer || ArrayBuffer.isView(given);
    const leftToUs = given !== undefined && given !== null && typeof given === "object" && !sentAsIs
      && !hasHeader(headers, "content-type");
    // Files in a body left to sdkbox go as files where the operation takes them (multipart).
    const files = [];
    const marked = leftToUs ? withFiles(given, files, 0) : given;
    const body = rawBody(marked, headers);
    const query = queryPairs(options.query, "", []);
    // What JSON cannot hold (a BigInt, a cycle) keeps the plain encoding.
    const plain = (f) => { try { return f(); } catch { return null; } };
    const unencoded = {
      query: options.query !== null && typeof options.query === "object" && !(options.query instanceof URLSearchParams)
        ? plain(() => JSONParse(JSONStringify(options.query))) : null,
      body: leftToUs ? plain(() => JSONParse(JSONStringify(marked))) : null,
    };
    const raw = await http({ method: String(method), url: String(path), kind: "api", query, headers, unencoded }, body, files);
    return settle(raw, `${String(method).toUpperCase()} ${path}`);
  }

  // An SDK call: Rust checks `params` against the spec, encodes and sends the request.
  async function callRaw(group, method, params, extra = 0) {
    const files = [];
    const marked = withFiles(params ?? null, files, 0);
    const { layout, payload } = packed(null, files);
    const reply = await op_sdkbox_call(group, method, marked, extra, layout, payload);
    if (reply.error) {
      if (reply.error.kind === "invalid_call") throw new TypeError(reply.error.message);
      throw refusal(reply.error);
    }
    return reply.response;
  }

  // The operation behind each SDK method node: `paginate` reads it here, not from a
  // property, since every property of a node is a deeper name (`api.zones.settings.list`).
  const operations = new WeakMap();

  // `api.<group...>.<method>`: a node that is a method (call it) and a group (read a
  // deeper name from it) at once, so `api.zones.settings(...)` and
  // `api.zones.settings.list(...)` can both exist, as nested SDKs name them.
  const nodes = new Map();
  function sdkNode(path) {
    const key = path.join(".");
    if (nodes.has(key)) return nodes.get(key);
    const group = path.slice(0, -1).join(".");
    const method = path[path.length - 1];
    const what = `api.${key}`;
    const invoke = async (params, extra) => {
      if (group === "") {
        throw new TypeError(`${what} is a group, not a method: call one of its methods (search_docs shows them)`);
      }
      return settle(await callRaw(group, method, params, extra), what);
    };
    const node = new Proxy(async (params) => invoke(params, 0), {
      get(target, name) {
        // A node is a function to `fn.call(...)`, `fn.bind(...)` and string conversion;
        // those names are renamed with a `_` in the SDK (spec/naming), like `then`. They
        // call the node itself, so their arguments are counted as a direct call's.
        if (name === "call" || name === "apply" || name === "bind") return FunctionPrototype[name].bind(node);
        if (name === SymbolToPrimitive) return () => what;
        if (typeof name !== "string" || name === "then" || name === "toJSON") return undefined;
        return sdkNode([...path, name]);
      },
      apply(_, __, args) {
        // One object of parameters. Arguments after it (another SDK's positional form,
        // `update(id, { ... })`, or its request options) are refused, not dropped; what a
        // callback is handed (`list.map(api.customers.create)`: an item, its index, the array;
        // `Array.from(rows, api.customers.create)`: an item, its index) is not.
        const n = args.length;
        const callback = typeof args[1] === "number" && (n === 2 || (n === 3 && ArrayIsArray(args[2])));
        let extra = 0;
        if (!callback) for (let i = 1; i < n; i++) if (args[i] !== undefined) extra = i;
        return invoke(args[0], extra);
      },
    });
    operations.set(node, { group, method });
    nodes.set(key, node);
    return node;
  }

  // The query of the `Link` header's `rel` link (`next`, `last`).
  function linkTo(link, rel) {
    for (const part of String(link).split(",")) {
      const match = new RegExp(`<([^>]*)>\\s*;\\s*rel="?${rel}"?`).exec(part);
      if (match) return new URLSearchParams(match[1].split("?")[1] ?? "");
    }
    return null;
  }

  // The list in a page: the page itself, the property `key` names, else the one a list
  // style uses (`data`, `items`, `result`), else the page's only array (GitHub's
  // `workflow_runs`, `repositories`...). `null` when none is found.
  function listIn(body, key) {
    if (ArrayIsArray(body)) return body;
    if (body === null || typeof body !== "object") return null;
    if (key !== undefined) return ArrayIsArray(body[key]) ? body[key] : null;
    for (const name of ["data", "items", "result"]) if (ArrayIsArray(body[name])) return body[name];
    const arrays = ObjectEntries(body).filter(([, v]) => ArrayIsArray(v));
    return arrays.length === 1 ? arrays[0][1] : null;
  }

  // for await (const item of api.paginate(api.customers.list, { limit: 100 })) { ... }
  // Follows cursors (has_more + last id, Stripe search's next_page), Link headers
  // (rel="next"), Cloudflare's `result_info` (page of total_pages, or its cursor) or page
  // numbers; the items are found in each page
  // (`options.items` names their property); bounded by the execution's request budget.
  function paginate(method, params = {}, options = {}) {
    const op = operations.get(method);
    const what = op ? sdkName(op) : "...";
    return pagesOf(items(method, params, options), what);
  }

  // What `api.paginate` returns: an async iterator of the items, and nothing an array has, so
  // that array habits (`.filter`, `.length`, `for ... of`, `[...pages]`, `Array.from`) fail
  // saying what to write instead, not silently (`Array.from` of an async iterator is `[]`).
  function pagesOf(iterator, what) {
    const misuse = (how) => () => {
      throw new TypeError(
        `api.paginate(${what}, ...) gives the items one at a time, not an array (${how}): read ` +
          `them with for await (const item of api.paginate(...)), or collect them with ` +
          `const all = await Array.fromAsync(api.paginate(...))`,
      );
    };
    const pages = {
      next: (value) => iterator.next(value),
      return: (value) => iterator.return(value),
      throw: (error) => iterator.throw(error),
      [SymbolAsyncIterator]() {
        return this;
      },
      [SymbolIterator]: misuse("for ... of, spreading and Array.from need an array; for await ... of reads it"),
    };
    for (const name of ["filter", "map", "reduce", "forEach", "find", "some", "every", "flatMap", "slice", "includes", "indexOf", "join", "sort", "at", "concat"]) {
      pages[name] = misuse(`.${name} is an array's`);
    }
    ObjectDefineProperty(pages, "length", { get: misuse(".length is an array's") });
    return ObjectFreeze(pages);
  }

  async function* items(method, params, options) {
    const op = operations.get(method);
    if (!op || op.group === "") {
      throw new TypeError("api.paginate takes an SDK method and its parameters, like api.paginate(api.customers.list, { limit: 100 })");
    }
    const named = options?.items === undefined ? undefined : String(options.items);
    const what = `api.${op.group}.${op.method}`;
    let current = { ...params };
    // Pages `from` to `to`, known to be there: asked for a few at a time instead of one
    // round trip after another, and yielded in order (at most AHEAD - 1 asked for and not
    // read if the caller stops early; the execution's request budget bounds them all).
    async function* pagesAhead(from, to) {
      const AHEAD = 4;
      const pageOf = (n) => callRaw(op.group, op.method, { ...current, page: n }).then((r) => listIn(settle(r, what), named) ?? []);
      let next = from;
      const pending = [];
      while (next <= to || pending.length > 0) {
        while (pending.length < AHEAD && next <= to) {
          const asked = pageOf(next++);
          // A page not read (the caller stopped) must not fail the run when it fails.
          asked.catch(() => {});
          pending.push(asked);
        }
        const items = await pending.shift();
        for (const item of items) yield item;
        if (items.length === 0) return;
      }
    }
    let linked = false;
    // A provider that points at a page already read (a Link to itself, a page number that
    // does not move) ends the listing instead of repeating it.
    const asked = new Set();
    for (;;) {
      let key;
      try { key = JSONStringify(current); } catch { key = null; }
      if (key !== null) {
        if (asked.has(key)) return;
        asked.add(key);
      }
      const raw = await callRaw(op.group, op.method, current);
      const body = settle(raw, what);
      const items = listIn(body, named);
      if (items === null) {
        const arrays = body !== null && typeof body === "object" ? ObjectEntries(body).filter(([, v]) => ArrayIsArray(v)).map(([k]) => k) : [];
        const under = named === undefined ? "" : ` under \`${named}\``;
        const hint = arrays.length > 0
          ? `: its lists are under ${arrays.join(", ")}; say which with api.paginate(method, params, { items: "${arrays[0]}" })`
          : ": it does not return a list";
        throw new TypeError(`${what} returned no list${under}${hint}`);
      }
      for (const item of items) yield item;
      if (items.length === 0) return;
      if (body && !ArrayIsArray(body) && "has_more" in body) {
        if (!body.has_more) return;
        // Stripe's search pages by `next_page`; its lists by the last item's id.
        current = typeof body.next_page === "string"
          ? { ...current, page: body.next_page }
          : { ...current, starting_after: items[items.length - 1].id };
        continue;
      }
      const link = raw.headers.find(([k]) => k === "link")?.[1];
      if (link !== undefined || linked) {
        linked = true;
        const next = link === undefined ? null : linkTo(link, "next");
        if (next === null) return;
        for (const [k, v] of next) current[k] = /^\d+$/.test(v) ? Number(v) : v;
        // GitHub names the last page too: the pages between are known.
        const last = link === undefined ? null : linkTo(link, "last");
        const lastPage = Number(last?.get("page"));
        if (typeof current.page === "number" && NumberIsInteger(lastPage) && lastPage >= current.page) {
          yield* pagesAhead(current.page, lastPage);
          return;
        }
        continue;
      }
      const info = body?.result_info;
      // Cloudflare's cursor pages: `result_info.cursor` names the next one, empty at the end.
      if (info && "cursor" in info && info.total_pages === undefined) {
        if (typeof info.cursor !== "string" || info.cursor === "") return;
        current = { ...current, cursor: info.cursor };
        continue;
      }
      if (info && typeof info.total_pages === "number") {
        const page = typeof info.page === "number" ? info.page : (current.page ?? 1);
        if (page >= info.total_pages) return;
        yield* pagesAhead(page + 1, info.total_pages);
        return;
      }
      if (typeof current.page === "number") {
        current = { ...current, page: current.page + 1 };
        continue;
      }
      return;
    }
  }

  // Every name under `api` is the spec's, `constructor`, `toString` and `valueOf` too. The
  // names `api` keeps (`request`, `paginate`, and `then`/`toJSON`, which `await` and `JSON`
  // look for; `call`/`apply`/`bind` under a group, which nodes keep as functions) are
  // renamed with a `_` in the SDK (spec/naming), so every operation search shows can be
  // called.
  const helpers = ObjectAssign(ObjectCreate(null), { request, paginate });
  const api = new Proxy(helpers, {
    get(target, key) {
      if (typeof key !== "string" || key === "then" || key === "toJSON") return undefined;
      if (ObjectHasOwn(target, key)) return target[key];
      return sdkNode([key]);
    },
  });

  // A microtask that throws fails the execution with an Error too.
  const nativeQueueMicrotask = globalThis.queueMicrotask;
  const queueMicrotask = (callback) => {
    if (typeof callback !== "function") throw new TypeError("queueMicrotask takes a function");
    nativeQueueMicrotask(() => {
      try {
        callback();
      } catch (thrown) {
        throw asError(thrown);
      }
    });
  };

  // sdkbox.file(data, { name, type }): a file to return to the client, from text, bytes or
  // a Blob (a returned Blob or File is one already). Images reach it as images, other types
  // as embedded resources, large ones as links it reads with resources/read.
  const sdkbox = ObjectFreeze({
    file(data, options = {}) {
      const name = options.name === undefined ? (data instanceof File ? data.name : "file") : String(options.name);
      const type = options.type ?? (data instanceof Blob ? data.type : typeof data === "string" ? "text/plain" : "application/octet-stream");
      return new File([data instanceof Blob ? data : typeof data === "string" ? data : viewBytes(data) ?? String(data)], name, { type });
    },
  });

  const installed = {
    console,
    fetch,
    api,
    sdkbox,
    EgressError,
    PolicyError,
    ApiError,
    queueMicrotask,
    setTimeout: (f, ms, ...args) => schedule(f, ms, args, false),
    setInterval: (f, ms, ...args) => schedule(f, ms, args, true),
    clearTimeout: clear,
    clearInterval: clear,
  };
  if (testCrash) {
    installed.sdkboxTestCrash = () => op_sdkbox_test_crash(0);
    installed.sdkboxTestThreads = (n) => op_sdkbox_test_crash(n);
  }
  for (const [name, value] of ObjectEntries(installed)) {
    Object.defineProperty(globalThis, name, { value, writable: true, configurable: true, enumerable: false });
  }

  // ---- thrown values: what reaches deno_core is always a well-formed Error --------------
  // The engine cannot turn a thrown Symbol, a null-prototype object or a Proxy into an error
  // message (the QuickJS shim panics on them), so anything else is replaced by an Error that
  // says what was thrown.

  function shown(value) {
    try {
      const text = typeof value === "symbol" ? value.toString() : typeof value === "string" ? JSONStringify(value) : inspect(value);
      return text.length > 200 ? `${text.slice(0, 200)}…` : text;
    } catch {
      return "a value that cannot be shown";
    }
  }

  function isPlainError(value) {
    try {
      return (ErrorIsError(value) || value instanceof DOMExceptionCtor) && typeof value.name === "string" && typeof value.message === "string";
    } catch {
      return false;
    }
  }

  // An Error without what the engine would read further (`cause`, `errors`, which may hold
  // anything); one that cannot be stripped is copied into a fresh Error.
  function stripped(error) {
    try {
      delete error.cause;
      delete error.errors;
      if (!("cause" in error) && !("errors" in error)) return error;
    } catch {}
    const copy = new ErrorCtor(`${shown(error.message)}`);
    return copy;
  }

  function asError(value) {
    if (isPlainError(value)) return stripped(value);
    return new ErrorCtor(`the code threw ${shown(value)}, which is not an Error; throw new Error("...") instead`);
  }

  // A rejection nothing handled fails the execution, with an Error whatever was rejected.
  core.setUnhandledPromiseRejectionHandler((_promise, reason) => {
    reportRejection(isPlainError(reason) ? stripped(reason) : new ErrorCtor(`a promise was rejected with ${shown(reason)} and nothing handled it`));
    return true;
  });


  // The harness: loads the model's module, calls its entry and hands the JSON result to Rust.
  // An entry the script already ran (the guard module, `sdkbox:entry`, knows it by
  // `guarded`, its name there) is not called again: its result is the execution's.
  // `callEntry` is false when the script refers to its entry itself (the compiler's static
  // rule): then only the script runs it.
  async function harness(callEntry, guarded) {
    let value;
    try {
      const namespace = await import(MODULE_URL);
      const ran = guarded === null ? undefined : (await import(GUARD_URL)).outcome(guarded);
      const entry = namespace.__sdkbox_entry ?? namespace.default;
      if (ran !== undefined) {
        if ("error" in ran) throw ran.error;
        value = await ran.value;
      } else if (typeof entry !== "function") {
        value = entry;
      } else if (callEntry) {
        value = await entry(api);
      }
    } catch (thrown) {
      throw asError(thrown);
    }
    const { json, files } = resultOf(value);
    const { layout, payload } = packed(null, files);
    op_sdkbox_result(json, layout, payload);
  }

  // ---- remove the way back to deno_core, and engine globals a script has no use for ----
  // Done by `__sdkbox_seal()`, run after this prelude (and after a snapshot of it is
  // restored): deno_core needs its globals while it sets up or restores a runtime.
  Object.defineProperty(globalThis, "__sdkbox_seal", {
    configurable: true,
    value: () => {
      for (const name of Object.getOwnPropertyNames(globalThis)) {
        if (name === "Deno" || name === "__bootstrap" || name.startsWith("__")) delete globalThis[name];
      }
      for (const name of ["gc", "SharedArrayBuffer", "Atomics", "WebAssembly", "ShadowRealm"]) delete globalThis[name];
      return harness;
    },
  });
})();
