// The web platform a script written for Deno or Cloudflare Workers takes for granted:
// URL and URLSearchParams, TextEncoder/TextDecoder, Blob, File, FormData, Headers, Request,
// Response, AbortController/AbortSignal, EventTarget, crypto (randomUUID, getRandomValues,
// subtle digest and HMAC) and structuredClone. Runs before bootstrap.js, which takes what it
// needs from `globalThis.__sdkbox_web` (removed with every `__` name when the runtime is
// sealed) and installs `fetch` and `api` on top.
//
// What JavaScript does badly is done by ops (src/sandbox/web.rs): URLs by the WHATWG parser
// of the `url` crate, randomness by the operating system, digests and HMAC by aws-lc-rs.
// Bytes live in the engine's heap, under the execution's memory limit like everything else.
// Nothing here is a security boundary.
"use strict";
(() => {
  const core = globalThis.Deno.core;
  const { op_sdkbox_url_parse, op_sdkbox_url_set, op_sdkbox_random, op_sdkbox_digest, op_sdkbox_hmac } = core.ops;
  const encodeUtf8 = (text) => core.encode(String(text));
  const decodeUtf8 = (bytes) => core.decode(bytes);
  const { createTimer, cancelTimer } = core;
  const ArrayIsArray = Array.isArray;
  const ObjectEntries = Object.entries;
  const ObjectDefineProperty = Object.defineProperty;
  const DOMExceptionCtor = globalThis.DOMException;
  const SymbolIterator = Symbol.iterator;
  const internal = Symbol("sdkbox internal");
  const abortWith = Symbol("sdkbox abort");

  function domError(message, name) {
    return new DOMExceptionCtor(message, name);
  }

  // ---- bytes --------------------------------------------------------------------------

  // A copy of any BufferSource as a Uint8Array of its own.
  function copyBytes(source) {
    if (source instanceof ArrayBuffer) return new Uint8Array(source.slice(0));
    if (ArrayBuffer.isView(source)) {
      return new Uint8Array(source.buffer.slice(source.byteOffset, source.byteOffset + source.byteLength));
    }
    return null;
  }

  // A view of any BufferSource, without a copy.
  function viewBytes(source) {
    if (source instanceof ArrayBuffer) return new Uint8Array(source);
    if (ArrayBuffer.isView(source)) return new Uint8Array(source.buffer, source.byteOffset, source.byteLength);
    return null;
  }

  function concatBytes(parts) {
    let size = 0;
    for (const part of parts) size += part.byteLength;
    const out = new Uint8Array(size);
    let at = 0;
    for (const part of parts) {
      out.set(part, at);
      at += part.byteLength;
    }
    return out;
  }

  function bufferOf(bytes) {
    return bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength
      ? bytes.buffer
      : bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength);
  }

  // ---- TextEncoder / TextDecoder --------------------------------------------------------

  class TextEncoder {
    get encoding() { return "utf-8"; }
    encode(input = "") { return encodeUtf8(input); }
    encodeInto(source, destination) {
      const bytes = encodeUtf8(source);
      // Whole characters only: a cut never ends inside one.
      let written = Math.min(bytes.length, destination.length);
      while (written > 0 && written < bytes.length && (bytes[written] & 0xc0) === 0x80) written--;
      destination.set(bytes.subarray(0, written));
      const read = decodeUtf8(bytes.subarray(0, written)).length;
      return { read, written };
    }
  }

  const UTF8_LABELS = ["utf-8", "utf8", "unicode-1-1-utf-8", "unicode11utf8", "unicode20utf8", "x-unicode20utf8"];

  class TextDecoder {
    #fatal;
    #ignoreBOM;
    // With { stream: true }: the bytes of a character cut at the end of a chunk, kept for
    // the next one.
    #pending = new Uint8Array(0);
    #started = false;
    constructor(label = "utf-8", options = {}) {
      const name = String(label).trim().toLowerCase();
      if (!UTF8_LABELS.includes(name)) {
        throw new RangeError(`the encoding "${label}" is not supported here: only UTF-8 is (decode other encodings yourself)`);
      }
      this.#fatal = Boolean(options?.fatal);
      this.#ignoreBOM = Boolean(options?.ignoreBOM);
    }
    get encoding() { return "utf-8"; }
    get fatal() { return this.#fatal; }
    get ignoreBOM() { return this.#ignoreBOM; }
    decode(input, options) {
      let bytes = input === undefined ? new Uint8Array(0) : viewBytes(input);
      if (bytes === null) throw new TypeError("TextDecoder.decode takes an ArrayBuffer or a typed array");
      const stream = Boolean(options?.stream);
      if (this.#pending.length > 0) bytes = concatBytes([this.#pending, bytes]);
      this.#pending = new Uint8Array(0);
      if (stream) {
        // Keep an incomplete character at the end: up to 3 bytes after its lead byte.
        let cut = bytes.length;
        for (let back = 1; back <= 3 && back <= bytes.length; back++) {
          const b = bytes[bytes.length - back];
          if ((b & 0xc0) === 0x80) continue;
          const needed = b >= 0xf0 ? 4 : b >= 0xe0 ? 3 : b >= 0xc0 ? 2 : 1;
          if (needed > back) cut = bytes.length - back;
          break;
        }
        this.#pending = bytes.slice(cut);
        bytes = bytes.subarray(0, cut);
      }
      const first = !this.#started;
      // A stream has started once a chunk gave it bytes (a byte order mark cut in two is
      // still its start).
      this.#started = stream && (this.#started || bytes.length > 0);
      return this.#decoded(bytes, first);
    }
    #decoded(bytes, first) {
      const text = decodeUtf8(bytes);
      if (this.#fatal) {
        // Valid UTF-8 comes back byte for byte; a replaced sequence does not.
        const again = encodeUtf8(text);
        const skip = bytes.length >= 3 && bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf ? 3 : 0;
        let same = again.length === bytes.length - skip;
        for (let i = 0; same && i < again.length; i++) same = again[i] === bytes[i + skip];
        if (!same) throw new TypeError("the bytes are not valid UTF-8");
      }
      const bom = bytes.length >= 3 && bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf;
      // The engine's decoder drops a leading byte order mark: one past the first chunk, or
      // kept with ignoreBOM, is the text's own.
      if (bom && (this.#ignoreBOM || !first)) return `\uFEFF${text}`;
      return text;
    }
  }

  // ---- Blob and File ----------------------------------------------------------------------

  function blobPart(part) {
    if (part instanceof Blob) return part[internal];
    const bytes = copyBytes(part);
    if (bytes !== null) return bytes;
    return encodeUtf8(part);
  }

  function normalizeType(type) {
    const text = type === undefined ? "" : String(type);
    return /^[\x20-\x7e]*$/.test(text) ? text.toLowerCase() : "";
  }

  class Blob {
    #type;
    constructor(parts = [], options = {}) {
      if (parts === null || typeof parts !== "object" || typeof parts[SymbolIterator] !== "function") {
        throw new TypeError("new Blob(parts) takes an array of strings, bytes or Blobs");
      }
      const pieces = [];
      for (const part of parts) pieces.push(blobPart(part));
      this[internal] = concatBytes(pieces);
      this.#type = normalizeType(options?.type);
    }
    get size() { return this[internal].byteLength; }
    get type() { return this.#type; }
    slice(start = 0, end = this.size, type = "") {
      const size = this.size;
      const at = (n) => (n < 0 ? Math.max(size + n, 0) : Math.min(n, size));
      const blob = new Blob([], { type });
      blob[internal] = this[internal].slice(at(Math.trunc(start) || 0), at(Math.trunc(end) || 0));
      return blob;
    }
    async text() { return decodeUtf8(this[internal]); }
    async arrayBuffer() { return bufferOf(this[internal].slice()); }
    async bytes() { return this[internal].slice(); }
    get [Symbol.toStringTag]() { return "Blob"; }
  }
  ObjectDefineProperty(Blob.prototype, internal, { writable: true, value: undefined });

  class File extends Blob {
    #name;
    #lastModified;
    constructor(parts, name, options = {}) {
      if (arguments.length < 2) throw new TypeError("new File(parts, name) needs the file's name");
      super(parts, options);
      this.#name = String(name);
      this.#lastModified = options?.lastModified === undefined ? Date.now() : Number(options.lastModified);
    }
    get name() { return this.#name; }
    get lastModified() { return this.#lastModified; }
    get [Symbol.toStringTag]() { return "File"; }
  }

  // ---- FormData -----------------------------------------------------------------------------

  function formEntry(name, value, filename) {
    if (value instanceof Blob) {
      const named = filename !== undefined ? String(filename) : value instanceof File ? value.name : "blob";
      if (!(value instanceof File) || filename !== undefined) {
        value = new File([value], named, { type: value.type });
      }
      return [String(name), value];
    }
    return [String(name), String(value)];
  }

  class FormData {
    #entries = [];
    constructor(form) {
      if (form !== undefined) throw new TypeError("new FormData() takes no form here (there is no DOM)");
    }
    append(name, value, filename) { this.#entries.push(formEntry(name, value, filename)); }
    set(name, value, filename) {
      const entry = formEntry(name, value, filename);
      const at = this.#entries.findIndex(([n]) => n === entry[0]);
      this.delete(entry[0]);
      this.#entries.splice(at === -1 ? this.#entries.length : at, 0, entry);
    }
    get(name) { return this.#entries.find(([n]) => n === String(name))?.[1] ?? null; }
    getAll(name) { return this.#entries.filter(([n]) => n === String(name)).map(([, v]) => v); }
    has(name) { return this.#entries.some(([n]) => n === String(name)); }
    delete(name) { this.#entries = this.#entries.filter(([n]) => n !== String(name)); }
    forEach(callback, thisArg) { for (const [n, v] of this.#entries) callback.call(thisArg, v, n, this); }
    entries() { return this.#entries.map(([n, v]) => [n, v])[SymbolIterator](); }
    keys() { return this.#entries.map(([n]) => n)[SymbolIterator](); }
    values() { return this.#entries.map(([, v]) => v)[SymbolIterator](); }
    [SymbolIterator]() { return this.entries(); }
    get [Symbol.toStringTag]() { return "FormData"; }
  }

  // multipart/form-data as browsers write it (names and file names with ", CR and LF escaped),
  // with a boundary no part holds: the same for the same form, as an approval of a write is
  // an approval of its exact bytes, and a re-run must send them again. It is named after the
  // digest of the parts, which no part can hold in turn; one pass checks it.
  function multipart(form) {
    const texts = [];
    for (const [name, value] of form) {
      texts.push(encodeUtf8(name), typeof value === "string" ? encodeUtf8(value) : concatBytes([encodeUtf8(value.name), value[internal]]));
    }
    const digest = Array.from(op_sdkbox_digest("SHA-256", concatBytes(texts)).subarray(0, 12), (b) => b.toString(16).padStart(2, "0")).join("");
    const holds = (boundary) => texts.some((bytes) => decodeUtf8(bytes).includes(boundary));
    let n = 0;
    while (n < 4 && holds(`----sdkbox${digest}${n}`)) n++;
    const boundary = `----sdkbox${digest}${n}`;
    const escape = (s) => s.replace(/\r/g, "%0D").replace(/\n/g, "%0A").replace(/"/g, "%22");
    const pieces = [];
    for (const [name, value] of form) {
      let head = `--${boundary}\r\nContent-Disposition: form-data; name="${escape(name)}"`;
      if (typeof value === "string") {
        pieces.push(encodeUtf8(`${head}\r\n\r\n`), encodeUtf8(value.replace(/\r(?!\n)|(?<!\r)\n/g, "\r\n")), encodeUtf8("\r\n"));
      } else {
        head += `; filename="${escape(value.name)}"\r\nContent-Type: ${value.type || "application/octet-stream"}\r\n\r\n`;
        pieces.push(encodeUtf8(head), value[internal], encodeUtf8("\r\n"));
      }
    }
    pieces.push(encodeUtf8(`--${boundary}--\r\n`));
    return { bytes: concatBytes(pieces), type: `multipart/form-data; boundary=${boundary}` };
  }

  // ---- URLSearchParams and URL --------------------------------------------------------------

  // application/x-www-form-urlencoded, as the URL standard parses and writes it.
  function percentDecode(text) {
    const bytes = encodeUtf8(text.replace(/\+/g, " "));
    const out = new Uint8Array(bytes.length);
    let n = 0;
    const hex = (b) => (b >= 48 && b <= 57 ? b - 48 : b >= 65 && b <= 70 ? b - 55 : b >= 97 && b <= 102 ? b - 87 : -1);
    for (let i = 0; i < bytes.length; i++) {
      if (bytes[i] === 37 && i + 2 < bytes.length && hex(bytes[i + 1]) >= 0 && hex(bytes[i + 2]) >= 0) {
        out[n++] = hex(bytes[i + 1]) * 16 + hex(bytes[i + 2]);
        i += 2;
      } else {
        out[n++] = bytes[i];
      }
    }
    return decodeUtf8(out.subarray(0, n));
  }

  function formEncode(text) {
    let out = "";
    for (const b of encodeUtf8(text)) {
      if ((b >= 48 && b <= 57) || (b >= 65 && b <= 90) || (b >= 97 && b <= 122) || b === 42 || b === 45 || b === 46 || b === 95) {
        out += String.fromCharCode(b);
      } else if (b === 32) {
        out += "+";
      } else {
        out += `%${b.toString(16).toUpperCase().padStart(2, "0")}`;
      }
    }
    return out;
  }

  function parseForm(text) {
    const pairs = [];
    for (const part of text.split("&")) {
      if (part === "") continue;
      const at = part.indexOf("=");
      const name = at === -1 ? part : part.slice(0, at);
      const value = at === -1 ? "" : part.slice(at + 1);
      pairs.push([percentDecode(name), percentDecode(value)]);
    }
    return pairs;
  }

  class URLSearchParams {
    #pairs = [];
    #url = null;
    constructor(init = "") {
      if (init instanceof URLSearchParams) {
        this.#pairs = [...init].map(([k, v]) => [k, v]);
      } else if (init !== null && typeof init === "object") {
        if (typeof init[SymbolIterator] === "function") {
          for (const pair of init) {
            const items = [...pair];
            if (items.length !== 2) throw new TypeError("each pair given to URLSearchParams must be [name, value]");
            this.#pairs.push([String(items[0]), String(items[1])]);
          }
        } else {
          for (const [k, v] of ObjectEntries(init)) this.#pairs.push([k, String(v)]);
        }
      } else {
        const text = String(init);
        this.#pairs = parseForm(text.startsWith("?") ? text.slice(1) : text);
      }
    }
    static [internal](url, query) {
      const params = new URLSearchParams(query);
      params.#url = url;
      return params;
    }
    [internal](query) { this.#pairs = parseForm(query); }
    #changed() {
      if (this.#url !== null) this.#url[internal](this.toString());
    }
    get size() { return this.#pairs.length; }
    append(k, v) { this.#pairs.push([String(k), String(v)]); this.#changed(); }
    set(k, v) {
      const name = String(k);
      const at = this.#pairs.findIndex(([x]) => x === name);
      if (at === -1) {
        this.#pairs.push([name, String(v)]);
      } else {
        this.#pairs[at] = [name, String(v)];
        this.#pairs = this.#pairs.filter(([x], i) => x !== name || i <= at);
      }
      this.#changed();
    }
    get(k) { return this.#pairs.find(([x]) => x === String(k))?.[1] ?? null; }
    getAll(k) { return this.#pairs.filter(([x]) => x === String(k)).map(([, v]) => v); }
    has(k, v) { return this.#pairs.some(([x, y]) => x === String(k) && (v === undefined || y === String(v))); }
    delete(k, v) {
      this.#pairs = this.#pairs.filter(([x, y]) => !(x === String(k) && (v === undefined || y === String(v))));
      this.#changed();
    }
    sort() {
      // Stable, by UTF-16 code units, as the standard says.
      this.#pairs = this.#pairs.map((p, i) => [p, i]).sort(([a, i], [b, j]) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : i - j)).map(([p]) => p);
      this.#changed();
    }
    forEach(callback, thisArg) { for (const [k, v] of this.#pairs) callback.call(thisArg, v, k, this); }
    entries() { return this.#pairs.map(([k, v]) => [k, v])[SymbolIterator](); }
    keys() { return this.#pairs.map(([k]) => k)[SymbolIterator](); }
    values() { return this.#pairs.map(([, v]) => v)[SymbolIterator](); }
    [SymbolIterator]() { return this.entries(); }
    toString() { return this.#pairs.map(([k, v]) => `${formEncode(k)}=${formEncode(v)}`).join("&"); }
    get [Symbol.toStringTag]() { return "URLSearchParams"; }
  }

  function parseUrl(url, base) {
    const text = String(url);
    if (base === undefined) return op_sdkbox_url_parse(text, "", false);
    const baseText = base instanceof URL ? base.href : String(base);
    return op_sdkbox_url_parse(text, baseText, true);
  }

  // The parts op_sdkbox_url_parse answers with, in its order.
  const HREF = 0, ORIGIN = 1, PROTOCOL = 2, USERNAME = 3, PASSWORD = 4, HOST = 5, HOSTNAME = 6, PORT = 7, PATHNAME = 8, SEARCH = 9, HASH = 10;

  class URL {
    #parts;
    #params;
    constructor(url, base) {
      const parts = parseUrl(url, base);
      if (parts === null) {
        throw new TypeError(`Invalid URL: ${JSON.stringify(String(url))}${base === undefined ? "" : ` against ${JSON.stringify(String(base))}`}`);
      }
      this.#parts = parts;
      this.#params = URLSearchParams[internal](this, parts[SEARCH]);
    }
    static canParse(url, base) { return parseUrl(url, base) !== null; }
    static parse(url, base) {
      try { return new URL(url, base); } catch { return null; }
    }
    #set(part, value) {
      const parts = op_sdkbox_url_set(this.#parts[HREF], part, String(value));
      if (parts === null) throw new TypeError(`Invalid URL: ${JSON.stringify(String(value))}`);
      this.#parts = parts;
      if (part === HREF || part === SEARCH) this.#params[internal](parts[SEARCH].replace(/^\?/, ""));
    }
    // The query, as its URLSearchParams wrote it.
    [internal](query) {
      this.#parts = op_sdkbox_url_set(this.#parts[HREF], SEARCH, query) ?? this.#parts;
    }
    get href() { return this.#parts[HREF]; }
    set href(v) { this.#set(HREF, v); }
    get origin() { return this.#parts[ORIGIN]; }
    get protocol() { return this.#parts[PROTOCOL]; }
    set protocol(v) { this.#set(PROTOCOL, v); }
    get username() { return this.#parts[USERNAME]; }
    set username(v) { this.#set(USERNAME, v); }
    get password() { return this.#parts[PASSWORD]; }
    set password(v) { this.#set(PASSWORD, v); }
    get host() { return this.#parts[HOST]; }
    set host(v) { this.#set(HOST, v); }
    get hostname() { return this.#parts[HOSTNAME]; }
    set hostname(v) { this.#set(HOSTNAME, v); }
    get port() { return this.#parts[PORT]; }
    set port(v) { this.#set(PORT, v); }
    get pathname() { return this.#parts[PATHNAME]; }
    set pathname(v) { this.#set(PATHNAME, v); }
    get search() { return this.#parts[SEARCH]; }
    set search(v) { this.#set(SEARCH, v); }
    get hash() { return this.#parts[HASH]; }
    set hash(v) { this.#set(HASH, v); }
    get searchParams() { return this.#params; }
    toString() { return this.#parts[HREF]; }
    toJSON() { return this.#parts[HREF]; }
    get [Symbol.toStringTag]() { return "URL"; }
  }

  // ---- Headers ------------------------------------------------------------------------------

  const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;

  function headerName(name) {
    const text = String(name);
    if (!TOKEN.test(text)) throw new TypeError(`"${text}" is not a valid header name`);
    return text.toLowerCase();
  }

  function headerValue(value) {
    const text = String(value).replace(/^[\t\n\r ]+|[\t\n\r ]+$/g, "");
    if (/[\0\r\n]/.test(text)) throw new TypeError("a header value cannot hold NUL, CR or LF");
    return text;
  }

  class Headers {
    #list = [];
    // A provider's headers as they came: names and values are not the script's to check.
    static [internal](pairs) {
      const headers = new Headers();
      for (const [k, v] of pairs) headers.#list.push([String(k).toLowerCase(), String(v)]);
      return headers;
    }
    constructor(init) {
      if (init == null) return;
      if (init instanceof Headers) {
        for (const [k, v] of init.#list) this.#list.push([k, v]);
      } else if (typeof init[SymbolIterator] === "function") {
        for (const pair of init) {
          const items = [...pair];
          if (items.length !== 2) throw new TypeError("each header given as a list must be [name, value]");
          this.append(items[0], items[1]);
        }
      } else {
        for (const [k, v] of ObjectEntries(init)) this.append(k, v);
      }
    }
    append(k, v) { this.#list.push([headerName(k), headerValue(v)]); }
    set(k, v) {
      const name = headerName(k);
      const value = headerValue(v);
      const at = this.#list.findIndex(([n]) => n === name);
      this.#list = this.#list.filter(([n]) => n !== name);
      this.#list.splice(at === -1 ? this.#list.length : at, 0, [name, value]);
    }
    get(k) { return this.#joined(headerName(k)); }
    #joined(name) {
      const values = this.#list.filter(([n]) => n === name).map(([, v]) => v);
      return values.length === 0 ? null : values.join(", ");
    }
    getSetCookie() { return this.#list.filter(([n]) => n === "set-cookie").map(([, v]) => v); }
    has(k) { const name = headerName(k); return this.#list.some(([n]) => n === name); }
    delete(k) { const name = headerName(k); this.#list = this.#list.filter(([n]) => n !== name); }
    // Sorted by name, values of one name joined, set-cookie kept apart: as the standard says.
    #sorted() {
      const names = [...new Set(this.#list.map(([n]) => n))].sort();
      const out = [];
      for (const name of names) {
        if (name === "set-cookie") for (const v of this.getSetCookie()) out.push([name, v]);
        else out.push([name, this.#joined(name)]);
      }
      return out;
    }
    forEach(callback, thisArg) { for (const [k, v] of this.#sorted()) callback.call(thisArg, v, k, this); }
    entries() { return this.#sorted()[SymbolIterator](); }
    keys() { return this.#sorted().map(([k]) => k)[SymbolIterator](); }
    values() { return this.#sorted().map(([, v]) => v)[SymbolIterator](); }
    [SymbolIterator]() { return this.entries(); }
    toJSON() { return Object.fromEntries(this.#sorted()); }
    get [Symbol.toStringTag]() { return "Headers"; }
  }

  // ---- bodies: what Request, Response and fetch take and give --------------------------------

  // A body as bytes or text, and the content type it implies. Strings stay strings (sent as
  // UTF-8); everything else is bytes.
  function extractBody(body) {
    if (body === undefined || body === null) return null;
    if (typeof body === "string") return { text: body, type: "text/plain;charset=UTF-8" };
    if (body instanceof URLSearchParams) return { text: body.toString(), type: "application/x-www-form-urlencoded;charset=UTF-8" };
    if (body instanceof Blob) return { bytes: body[internal], type: body.type || null };
    if (body instanceof FormData) return multipart(body);
    const bytes = copyBytes(body);
    if (bytes !== null) return { bytes, type: null };
    return { text: String(body), type: "text/plain;charset=UTF-8" };
  }

  function bodyBytes(body) {
    if (body === null) return new Uint8Array(0);
    return body.bytes ?? encodeUtf8(body.text);
  }

  function bodyText(body) {
    if (body === null) return "";
    return body.text ?? decodeUtf8(body.bytes);
  }

  // Reading a body, once: what Request and Response share.
  class Body {
    #body;
    #used = false;
    constructor(body) { this.#body = body; }
    get bodyUsed() { return this.#used; }
    get body() { return this.#body === null ? null : { locked: this.#used }; }
    #take(what) {
      if (this.#used) throw new TypeError(`the body was already read; read it once (or clone() first) before ${what}`);
      this.#used = true;
      return this.#body;
    }
    [internal](mark) {
      if (mark) this.#used = true;
      return this.#body;
    }
    async text() { return bodyText(this.#take("text()")); }
    async json() {
      const text = bodyText(this.#take("json()"));
      try {
        return JSON.parse(text);
      } catch (e) {
        const where = this.url ? ` from ${this.url}` : "";
        throw new SyntaxError(`the body${where} is not JSON (${e.message}); it starts with: ${text.slice(0, 200)}`);
      }
    }
    async arrayBuffer() { return bufferOf(bodyBytes(this.#take("arrayBuffer()")).slice()); }
    async bytes() { return bodyBytes(this.#take("bytes()")).slice(); }
    async blob() {
      const body = this.#take("blob()");
      const type = this.headers.get("content-type") ?? "";
      return new Blob([bodyBytes(body)], { type });
    }
    async formData() {
      const body = this.#take("formData()");
      const type = this.headers.get("content-type") ?? "";
      if (!/application\/x-www-form-urlencoded/i.test(type)) {
        throw new TypeError(`formData() reads application/x-www-form-urlencoded bodies here, not ${type || "this one"}`);
      }
      const form = new FormData();
      for (const [k, v] of parseForm(bodyText(body))) form.append(k, v);
      return form;
    }
  }

  function withType(headers, body) {
    if (body !== null && body.type && !headers.has("content-type")) headers.set("content-type", body.type);
    return headers;
  }

  // Methods written in any case that the standard upper-cases (PATCH is not one of them).
  const METHODS = ["DELETE", "GET", "HEAD", "OPTIONS", "POST", "PUT"];

  class Request extends Body {
    #url;
    #method;
    #headers;
    #signal;
    constructor(input, init = {}) {
      const from = input instanceof Request ? input : null;
      let body = init.body !== undefined ? extractBody(init.body) : from ? from[internal](false) : null;
      if (from && init.body === undefined && body !== null) {
        if (from.bodyUsed) throw new TypeError("the Request's body was already read");
        from[internal](true);
      }
      const method = String(init.method ?? from?.method ?? "GET");
      const upper = method.toUpperCase();
      if (!TOKEN.test(method) || ["CONNECT", "TRACE", "TRACK"].includes(upper)) {
        throw new TypeError(`${JSON.stringify(method)} is not a method a request can have`);
      }
      const normalized = METHODS.includes(upper) ? upper : method;
      if ((normalized === "GET" || normalized === "HEAD") && body !== null) {
        throw new TypeError(`a ${normalized} request cannot have a body`);
      }
      super(body);
      const url = from ? from.url : input instanceof URL ? input.href : String(input);
      const parsed = parseUrl(url);
      // A path ("/v1/customers") is kept: fetch resolves it against the provider's base URL.
      if (parsed === null && !url.startsWith("/")) throw new TypeError(`Invalid URL: ${JSON.stringify(url)}`);
      this.#url = parsed === null ? url : parsed[0];
      this.#method = normalized;
      this.#headers = withType(new Headers(init.headers ?? from?.headers), body);
      this.#signal = init.signal ?? from?.signal ?? new AbortController().signal;
    }
    get url() { return this.#url; }
    get method() { return this.#method; }
    get headers() { return this.#headers; }
    get signal() { return this.#signal; }
    get redirect() { return "follow"; }
    clone() {
      if (this.bodyUsed) throw new TypeError("a Request whose body was read cannot be cloned");
      const body = this[internal](false);
      return new Request(this.#url, { method: this.#method, headers: this.#headers, signal: this.#signal, body: body === null ? null : body.bytes ?? body.text });
    }
    get [Symbol.toStringTag]() { return "Request"; }
  }

  class Response extends Body {
    #status;
    #statusText;
    #headers;
    #url;
    #type;
    constructor(body = null, init = {}) {
      const raw = init?.[internal];
      const extracted = raw ? (raw.bytes ? { bytes: raw.bytes } : { text: raw.body }) : extractBody(body);
      super(extracted);
      const status = raw ? raw.status : init.status === undefined ? 200 : Number(init.status);
      if (!raw && (!Number.isInteger(status) || status < 200 || status > 599)) {
        throw new RangeError(`a Response's status must be from 200 to 599, not ${init.status}`);
      }
      if (!raw && extracted !== null && [204, 205, 304].includes(status)) {
        throw new TypeError(`a Response with status ${status} cannot have a body`);
      }
      this.#status = status;
      this.#statusText = raw ? raw.status_text : String(init.statusText ?? "");
      this.#headers = raw ? Headers[internal](raw.headers) : withType(new Headers(init.headers), extracted);
      this.#url = raw ? raw.url : "";
      this.#type = raw ? "basic" : "default";
    }
    static json(data, init = {}) {
      const text = JSON.stringify(data);
      if (text === undefined) throw new TypeError("Response.json() takes a value JSON can hold");
      const headers = new Headers(init.headers);
      if (!headers.has("content-type")) headers.set("content-type", "application/json");
      return new Response(text, { ...init, headers });
    }
    static redirect(url, status = 302) {
      if (![301, 302, 303, 307, 308].includes(status)) throw new RangeError(`${status} is not a redirect status`);
      return new Response(null, { status, headers: { location: new URL(url).href } });
    }
    static error() {
      const response = new Response(null, { status: 200 });
      response.#status = 0;
      response.#type = "error";
      return response;
    }
    get status() { return this.#status; }
    get statusText() { return this.#statusText; }
    get ok() { return this.#status >= 200 && this.#status < 300; }
    get headers() { return this.#headers; }
    get url() { return this.#url; }
    get type() { return this.#type; }
    get redirected() { return false; }
    clone() {
      if (this.bodyUsed) throw new TypeError("a Response whose body was read cannot be cloned");
      const body = this[internal](false);
      const copy = new Response(body === null ? null : body.bytes ?? body.text, { status: this.#status === 0 ? 200 : this.#status, statusText: this.#statusText, headers: this.#headers });
      copy.#status = this.#status;
      copy.#url = this.#url;
      copy.#type = this.#type;
      return copy;
    }
    get [Symbol.toStringTag]() { return "Response"; }
  }

  // A Response for what the provider answered (`raw` from the op).
  function responseFrom(raw) {
    return new Response(null, { [internal]: raw });
  }

  // ---- events and aborting ----------------------------------------------------------------

  class Event {
    #type;
    #target = null;
    #stopped = false;
    #canceled = false;
    #cancelable;
    constructor(type, init = {}) {
      this.#type = String(type);
      this.#cancelable = Boolean(init?.cancelable);
      this.timeStamp = Date.now();
    }
    get type() { return this.#type; }
    get target() { return this.#target; }
    get currentTarget() { return this.#target; }
    get defaultPrevented() { return this.#canceled; }
    get cancelable() { return this.#cancelable; }
    preventDefault() { if (this.#cancelable) this.#canceled = true; }
    stopImmediatePropagation() { this.#stopped = true; }
    stopPropagation() {}
    [internal](target) {
      if (target !== undefined) this.#target = target;
      return this.#stopped;
    }
  }

  class EventTarget {
    #listeners = new Map();
    // An `on<type>` handler, as browsers keep it: one listener, placed where it was first set.
    [internal](type, handler) {
      const key = `on${type}`;
      const list = this.#listeners.get(type) ?? [];
      const at = list.findIndex((l) => l.handler === key);
      if (handler === null || typeof handler !== "function") {
        if (at !== -1) list.splice(at, 1);
      } else if (at !== -1) {
        list[at].listener = handler;
      } else {
        list.push({ listener: handler, once: false, handler: key });
      }
      this.#listeners.set(type, list);
    }
    addEventListener(type, listener, options) {
      if (listener == null) return;
      const once = typeof options === "object" && options !== null && Boolean(options.once);
      const signal = typeof options === "object" && options !== null ? options.signal : undefined;
      if (signal?.aborted) return;
      const list = this.#listeners.get(type) ?? [];
      if (list.some((l) => l.listener === listener)) return;
      list.push({ listener, once });
      this.#listeners.set(type, list);
      signal?.addEventListener("abort", () => this.removeEventListener(type, listener));
    }
    removeEventListener(type, listener) {
      const list = this.#listeners.get(type);
      if (list) this.#listeners.set(type, list.filter((l) => l.listener !== listener));
    }
    dispatchEvent(event) {
      event[internal](this);
      const list = [...(this.#listeners.get(event.type) ?? [])];
      for (const { listener, once } of list) {
        if (once) this.removeEventListener(event.type, listener);
        try {
          if (typeof listener === "function") listener.call(this, event);
          else listener.handleEvent(event);
        } catch (thrown) {
          // As browsers do: a listener's error is reported, the others still run.
          queueMicrotask(() => { throw thrown; });
        }
        if (event[internal]()) break;
      }
      return !event.defaultPrevented;
    }
  }

  class AbortSignal extends EventTarget {
    #aborted = false;
    #reason = undefined;
    #onabort = null;
    constructor(key) {
      if (key !== internal) throw new TypeError("make an AbortSignal with new AbortController() or AbortSignal.abort()");
      super();
    }
    get onabort() { return this.#onabort; }
    set onabort(handler) {
      this.#onabort = typeof handler === "function" ? handler : null;
      this[internal]("abort", this.#onabort);
    }
    get aborted() { return this.#aborted; }
    get reason() { return this.#reason; }
    throwIfAborted() { if (this.#aborted) throw this.#reason; }
    [abortWith](reason) {
      if (this.#aborted) return;
      this.#aborted = true;
      this.#reason = reason === undefined ? domError("the operation was aborted", "AbortError") : reason;
      this.dispatchEvent(new Event("abort"));
    }
    static abort(reason) {
      const signal = new AbortSignal(internal);
      signal[abortWith](reason);
      return signal;
    }
    static timeout(ms) {
      const signal = new AbortSignal(internal);
      // Kept alive by the event loop (a script may wait for it); the execution's deadline
      // bounds it like any timer.
      createTimer(() => signal[abortWith](domError("the operation timed out", "TimeoutError")), Number(ms) || 0, undefined, false, true);
      return signal;
    }
    static any(signals) {
      const signal = new AbortSignal(internal);
      for (const one of signals) {
        if (one.aborted) {
          signal[abortWith](one.reason);
          return signal;
        }
      }
      for (const one of signals) one.addEventListener("abort", () => signal[abortWith](one.reason), { once: true });
      return signal;
    }
  }

  class AbortController {
    #signal = new AbortSignal(internal);
    get signal() { return this.#signal; }
    abort(reason) { this.#signal[abortWith](reason); }
  }

  // ---- crypto -----------------------------------------------------------------------------

  const INTEGER_ARRAYS = [Int8Array, Uint8Array, Uint8ClampedArray, Int16Array, Uint16Array, Int32Array, Uint32Array, BigInt64Array, BigUint64Array];

  function getRandomValues(array) {
    if (!INTEGER_ARRAYS.some((T) => array instanceof T)) {
      throw domError("getRandomValues takes an integer typed array (Uint8Array, Uint32Array, ...)", "TypeMismatchError");
    }
    if (array.byteLength > 65536) {
      throw domError(`getRandomValues fills at most 65536 bytes at a time, not ${array.byteLength}`, "QuotaExceededError");
    }
    if (!op_sdkbox_random(viewBytes(array))) throw new Error("the operating system gave no random bytes");
    return array;
  }

  function randomUUID() {
    const bytes = getRandomValues(new Uint8Array(16));
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    const hex = Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
    return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
  }

  const HASHES = { "SHA-1": 512, "SHA-256": 512, "SHA-384": 1024, "SHA-512": 1024 };

  function hashName(algorithm) {
    const name = typeof algorithm === "string" ? algorithm : algorithm?.name;
    const found = Object.keys(HASHES).find((h) => h.toLowerCase() === String(name).toLowerCase());
    if (!found) throw domError(`the hash ${JSON.stringify(name)} is not supported here: SHA-1, SHA-256, SHA-384 or SHA-512`, "NotSupportedError");
    return found;
  }

  function bufferSource(data, what) {
    const bytes = viewBytes(data);
    if (bytes === null) throw new TypeError(`${what} takes an ArrayBuffer or a typed array (encode text with new TextEncoder().encode(text))`);
    return bytes;
  }

  class CryptoKey {
    constructor(key) {
      if (key !== internal) throw new TypeError("make a CryptoKey with crypto.subtle.importKey or generateKey");
    }
    get [Symbol.toStringTag]() { return "CryptoKey"; }
  }

  function hmacKey(bytes, hash, extractable, usages, length) {
    const key = new CryptoKey(internal);
    const bits = length === undefined ? bytes.byteLength * 8 : Number(length);
    ObjectDefineProperty(key, internal, { value: bytes });
    Object.assign(key, { type: "secret", extractable: Boolean(extractable), algorithm: { name: "HMAC", hash: { name: hash }, length: bits }, usages: [...usages] });
    return Object.freeze(key);
  }

  function hmacAlgorithm(algorithm) {
    const name = typeof algorithm === "string" ? algorithm : algorithm?.name;
    if (String(name).toUpperCase() !== "HMAC") {
      throw domError(`only HMAC keys are supported here, not ${JSON.stringify(name)}`, "NotSupportedError");
    }
  }

  function usable(key, usage) {
    if (!(key instanceof CryptoKey) || key[internal] === undefined) throw new TypeError("expected a CryptoKey from crypto.subtle.importKey");
    if (!key.usages.includes(usage)) throw domError(`the key was not imported for "${usage}"`, "InvalidAccessError");
    return key;
  }

  const subtle = {
    async digest(algorithm, data) {
      const name = hashName(algorithm);
      return bufferOf(op_sdkbox_digest(name, bufferSource(data, "crypto.subtle.digest")));
    },
    async importKey(format, keyData, algorithm, extractable, usages) {
      hmacAlgorithm(algorithm);
      const hash = hashName(algorithm.hash);
      let bytes;
      if (format === "raw") {
        bytes = copyBytes(keyData);
        if (bytes === null) throw new TypeError("a raw key is an ArrayBuffer or a typed array");
      } else if (format === "jwk") {
        const k = String(keyData?.k ?? "");
        bytes = Uint8Array.from(atob(k.replace(/-/g, "+").replace(/_/g, "/")), (c) => c.charCodeAt(0));
      } else {
        throw domError(`the key format ${JSON.stringify(format)} is not supported for HMAC here: raw or jwk`, "NotSupportedError");
      }
      if (bytes.byteLength === 0) throw domError("an HMAC key cannot be empty", "DataError");
      return hmacKey(bytes, hash, extractable, usages, algorithm.length);
    },
    async generateKey(algorithm, extractable, usages) {
      hmacAlgorithm(algorithm);
      const hash = hashName(algorithm.hash);
      const bits = algorithm.length ?? HASHES[hash];
      return hmacKey(getRandomValues(new Uint8Array(Math.ceil(bits / 8))), hash, extractable, usages, bits);
    },
    async exportKey(format, key) {
      if (!key.extractable) throw domError("the key is not extractable", "InvalidAccessError");
      if (format !== "raw") throw domError("HMAC keys are exported as raw here", "NotSupportedError");
      return bufferOf(key[internal].slice());
    },
    async sign(algorithm, key, data) {
      hmacAlgorithm(algorithm);
      usable(key, "sign");
      return bufferOf(op_sdkbox_hmac(key.algorithm.hash.name, key[internal], bufferSource(data, "crypto.subtle.sign")));
    },
    async verify(algorithm, key, signature, data) {
      hmacAlgorithm(algorithm);
      usable(key, "verify");
      const expected = op_sdkbox_hmac(key.algorithm.hash.name, key[internal], bufferSource(data, "crypto.subtle.verify"));
      const given = bufferSource(signature, "crypto.subtle.verify");
      if (given.byteLength !== expected.byteLength) return false;
      let diff = 0;
      for (let i = 0; i < expected.byteLength; i++) diff |= expected[i] ^ given[i];
      return diff === 0;
    },
  };

  const crypto = Object.freeze({ getRandomValues, randomUUID, subtle: Object.freeze(subtle) });

  // ---- structuredClone --------------------------------------------------------------------

  // The structured clone algorithm, in JavaScript: the engine's own loops forever on a cycle
  // (the QuickJS shim, measured). Cycles and shared references are kept; class instances
  // become plain objects; functions, symbols, and objects of other kinds refuse, as the
  // standard says.
  const ERRORS = { Error, EvalError, RangeError, ReferenceError, SyntaxError, TypeError, URIError };
  const TYPED = [Int8Array, Uint8Array, Uint8ClampedArray, Int16Array, Uint16Array, Int32Array, Uint32Array, Float32Array, Float64Array, BigInt64Array, BigUint64Array];

  function cloneValue(value, seen, depth) {
    if (value === null) return null;
    const kind = typeof value;
    if (kind === "function" || kind === "symbol") {
      throw domError(`${kind === "function" ? "a function" : "a symbol"} cannot be cloned`, "DataCloneError");
    }
    if (kind !== "object") return value;
    if (seen.has(value)) return seen.get(value);
    if (depth > 10000) throw domError("the value is nested too deeply to clone", "DataCloneError");
    const keep = (copy) => { seen.set(value, copy); return copy; };
    if (value instanceof Boolean || value instanceof Number || value instanceof String || value instanceof BigInt) {
      return keep(Object(value.valueOf()));
    }
    if (value instanceof Date) return keep(new Date(value.getTime()));
    if (value instanceof RegExp) return keep(new RegExp(value.source, value.flags));
    if (value instanceof ArrayBuffer) return keep(value.slice(0));
    if (ArrayBuffer.isView(value)) {
      const buffer = cloneValue(value.buffer, seen, depth + 1);
      if (value instanceof DataView) return keep(new DataView(buffer, value.byteOffset, value.byteLength));
      const T = TYPED.find((t) => value instanceof t);
      return keep(new T(buffer, value.byteOffset, value.length));
    }
    if (value instanceof Blob) {
      return keep(value instanceof File ? new File([value], value.name, { type: value.type, lastModified: value.lastModified }) : value.slice(0, value.size, value.type));
    }
    if (value instanceof Error) {
      const Ctor = ERRORS[value.name] ?? Error;
      const copy = keep(new Ctor(String(value.message)));
      if (value.stack !== undefined) copy.stack = String(value.stack);
      if ("cause" in value) copy.cause = cloneValue(value.cause, seen, depth + 1);
      return copy;
    }
    if (value instanceof Map) {
      const copy = keep(new Map());
      for (const [k, v] of value) copy.set(cloneValue(k, seen, depth + 1), cloneValue(v, seen, depth + 1));
      return copy;
    }
    if (value instanceof Set) {
      const copy = keep(new Set());
      for (const v of value) copy.add(cloneValue(v, seen, depth + 1));
      return copy;
    }
    if (ArrayIsArray(value)) {
      const copy = keep(new Array(value.length));
      for (const k of Object.keys(value)) copy[k] = cloneValue(value[k], seen, depth + 1);
      return copy;
    }
    if (value instanceof Promise || value instanceof WeakMap || value instanceof WeakSet || value instanceof WeakRef
        || value instanceof Request || value instanceof Response || value instanceof Headers || value instanceof URL
        || value instanceof CryptoKey || value instanceof AbortSignal || value instanceof EventTarget) {
      throw domError(`a ${value[Symbol.toStringTag] ?? value.constructor?.name ?? "value"} cannot be cloned`, "DataCloneError");
    }
    const copy = keep({});
    for (const k of Object.keys(value)) copy[k] = cloneValue(value[k], seen, depth + 1);
    return copy;
  }

  function structuredClone(value, options) {
    if (arguments.length === 0) throw new TypeError("structuredClone needs a value");
    if (options?.transfer?.length) throw domError("transferring is not supported here", "DataCloneError");
    return cloneValue(value, new Map(), 0);
  }

  const installed = {
    TextEncoder, TextDecoder, Blob, File, FormData, URL, URLSearchParams, Headers, Request, Response,
    Event, EventTarget, AbortController, AbortSignal, CryptoKey, crypto, structuredClone,
  };
  for (const [name, value] of ObjectEntries(installed)) {
    ObjectDefineProperty(globalThis, name, { value, writable: true, configurable: true, enumerable: false });
  }
  ObjectDefineProperty(globalThis, "__sdkbox_web", {
    configurable: true,
    value: { internal, extractBody, bodyBytes, responseFrom, concatBytes, viewBytes },
  });
})();
