// What a script has besides `api`, as the sandbox defines it (src/sandbox/web.js and
// bootstrap.js): console, fetch (the provider's origins only), timers, the web platform of
// Deno and Workers (URL, Blob, FormData, Request/Response, crypto, ...) and `sdkbox.file`.
// No DOM, no Node.

interface Console {
  log(...data: unknown[]): void;
  info(...data: unknown[]): void;
  warn(...data: unknown[]): void;
  error(...data: unknown[]): void;
  debug(...data: unknown[]): void;
}
declare const console: Console;

type HeadersInit = Headers | Record<string, string> | [string, string][];

declare class Headers implements Iterable<[string, string]> {
  constructor(init?: HeadersInit);
  append(name: string, value: string): void;
  set(name: string, value: string): void;
  get(name: string): string | null;
  getSetCookie(): string[];
  has(name: string): boolean;
  delete(name: string): void;
  forEach(callback: (value: string, name: string, headers: Headers) => void): void;
  entries(): IterableIterator<[string, string]>;
  keys(): IterableIterator<string>;
  values(): IterableIterator<string>;
  [Symbol.iterator](): IterableIterator<[string, string]>;
}

declare class URLSearchParams implements Iterable<[string, string]> {
  constructor(init?: string | URLSearchParams | Record<string, string> | Iterable<[string, string]>);
  readonly size: number;
  append(name: string, value: string): void;
  set(name: string, value: string): void;
  get(name: string): string | null;
  getAll(name: string): string[];
  has(name: string, value?: string): boolean;
  delete(name: string, value?: string): void;
  sort(): void;
  forEach(callback: (value: string, name: string, params: URLSearchParams) => void): void;
  entries(): IterableIterator<[string, string]>;
  keys(): IterableIterator<string>;
  values(): IterableIterator<string>;
  [Symbol.iterator](): IterableIterator<[string, string]>;
  toString(): string;
}

/** A WHATWG URL, parsed as browsers, Deno and Workers parse it. */
declare class URL {
  constructor(url: string | URL, base?: string | URL);
  static canParse(url: string | URL, base?: string | URL): boolean;
  static parse(url: string | URL, base?: string | URL): URL | null;
  href: string;
  readonly origin: string;
  protocol: string;
  username: string;
  password: string;
  host: string;
  hostname: string;
  port: string;
  pathname: string;
  search: string;
  hash: string;
  readonly searchParams: URLSearchParams;
  toString(): string;
  toJSON(): string;
}

declare class TextEncoder {
  readonly encoding: "utf-8";
  encode(input?: string): Uint8Array;
  encodeInto(source: string, destination: Uint8Array): { read: number; written: number };
}

/** UTF-8 only. */
declare class TextDecoder {
  constructor(label?: string, options?: { fatal?: boolean; ignoreBOM?: boolean });
  readonly encoding: string;
  readonly fatal: boolean;
  readonly ignoreBOM: boolean;
  decode(input?: ArrayBuffer | ArrayBufferView, options?: { stream?: boolean }): string;
}

type BufferSource = ArrayBuffer | ArrayBufferView;
type BlobPart = string | BufferSource | Blob;

declare class Blob {
  constructor(parts?: BlobPart[], options?: { type?: string });
  readonly size: number;
  readonly type: string;
  slice(start?: number, end?: number, type?: string): Blob;
  text(): Promise<string>;
  arrayBuffer(): Promise<ArrayBuffer>;
  bytes(): Promise<Uint8Array>;
}

declare class File extends Blob {
  constructor(parts: BlobPart[], name: string, options?: { type?: string; lastModified?: number });
  readonly name: string;
  readonly lastModified: number;
}

type FormDataEntryValue = string | File;

declare class FormData implements Iterable<[string, FormDataEntryValue]> {
  constructor();
  append(name: string, value: string | Blob, filename?: string): void;
  set(name: string, value: string | Blob, filename?: string): void;
  get(name: string): FormDataEntryValue | null;
  getAll(name: string): FormDataEntryValue[];
  has(name: string): boolean;
  delete(name: string): void;
  forEach(callback: (value: FormDataEntryValue, name: string, form: FormData) => void): void;
  entries(): IterableIterator<[string, FormDataEntryValue]>;
  keys(): IterableIterator<string>;
  values(): IterableIterator<FormDataEntryValue>;
  [Symbol.iterator](): IterableIterator<[string, FormDataEntryValue]>;
}

type BodyInit = string | URLSearchParams | FormData | Blob | BufferSource;

interface Body {
  readonly bodyUsed: boolean;
  text(): Promise<string>;
  json(): Promise<any>;
  arrayBuffer(): Promise<ArrayBuffer>;
  bytes(): Promise<Uint8Array>;
  blob(): Promise<Blob>;
  formData(): Promise<FormData>;
}

interface RequestInit {
  method?: string;
  headers?: HeadersInit;
  /** A plain object is sent as JSON. */
  body?: BodyInit | Record<string, unknown> | unknown[] | null;
  signal?: AbortSignal | null;
}

// A class and an interface of one name merge: Request and Response read their body as Body.
interface Request extends Body {}
declare class Request {
  constructor(input: string | URL | Request, init?: RequestInit);
  readonly url: string;
  readonly method: string;
  readonly headers: Headers;
  readonly signal: AbortSignal;
  clone(): Request;
}

interface ResponseInit {
  status?: number;
  statusText?: string;
  headers?: HeadersInit;
}

interface Response extends Body {}
declare class Response {
  constructor(body?: BodyInit | null, init?: ResponseInit);
  static json(data: unknown, init?: ResponseInit): Response;
  static redirect(url: string | URL, status?: number): Response;
  static error(): Response;
  readonly status: number;
  readonly statusText: string;
  readonly ok: boolean;
  readonly url: string;
  readonly type: string;
  readonly redirected: boolean;
  readonly headers: Headers;
  clone(): Response;
}

declare function fetch(input: string | URL | Request, init?: RequestInit): Promise<Response>;

declare class Event {
  constructor(type: string, init?: { cancelable?: boolean });
  readonly type: string;
  readonly target: EventTarget | null;
  readonly currentTarget: EventTarget | null;
  readonly defaultPrevented: boolean;
  readonly cancelable: boolean;
  readonly timeStamp: number;
  preventDefault(): void;
  stopPropagation(): void;
  stopImmediatePropagation(): void;
}

type EventListenerOrObject = ((event: Event) => void) | { handleEvent(event: Event): void };

declare class EventTarget {
  addEventListener(type: string, listener: EventListenerOrObject | null, options?: boolean | { once?: boolean; signal?: AbortSignal }): void;
  removeEventListener(type: string, listener: EventListenerOrObject | null): void;
  dispatchEvent(event: Event): boolean;
}

declare class AbortSignal extends EventTarget {
  readonly aborted: boolean;
  readonly reason: any;
  onabort: ((event: Event) => void) | null;
  throwIfAborted(): void;
  static abort(reason?: any): AbortSignal;
  static timeout(ms: number): AbortSignal;
  static any(signals: AbortSignal[]): AbortSignal;
}

declare class AbortController {
  readonly signal: AbortSignal;
  abort(reason?: any): void;
}

declare class DOMException extends Error {
  constructor(message?: string, name?: string);
  readonly code: number;
}

/** An HMAC key (the only kind the sandbox has). */
declare class CryptoKey {
  readonly type: "secret";
  readonly extractable: boolean;
  readonly algorithm: { name: "HMAC"; hash: { name: string }; length: number };
  readonly usages: string[];
}

type HashName = "SHA-1" | "SHA-256" | "SHA-384" | "SHA-512";
type HmacParams = { name: "HMAC"; hash: HashName | { name: HashName }; length?: number };

interface SubtleCrypto {
  digest(algorithm: HashName | { name: HashName }, data: BufferSource): Promise<ArrayBuffer>;
  importKey(format: "raw", keyData: BufferSource, algorithm: HmacParams, extractable: boolean, usages: ("sign" | "verify")[]): Promise<CryptoKey>;
  importKey(format: "jwk", keyData: { k: string; [key: string]: unknown }, algorithm: HmacParams, extractable: boolean, usages: ("sign" | "verify")[]): Promise<CryptoKey>;
  generateKey(algorithm: HmacParams, extractable: boolean, usages: ("sign" | "verify")[]): Promise<CryptoKey>;
  exportKey(format: "raw", key: CryptoKey): Promise<ArrayBuffer>;
  sign(algorithm: "HMAC" | { name: "HMAC" }, key: CryptoKey, data: BufferSource): Promise<ArrayBuffer>;
  verify(algorithm: "HMAC" | { name: "HMAC" }, key: CryptoKey, signature: BufferSource, data: BufferSource): Promise<boolean>;
}

interface Crypto {
  readonly subtle: SubtleCrypto;
  getRandomValues<T extends Int8Array | Uint8Array | Uint8ClampedArray | Int16Array | Uint16Array | Int32Array | Uint32Array | BigInt64Array | BigUint64Array>(array: T): T;
  randomUUID(): `${string}-${string}-${string}-${string}-${string}`;
}
declare const crypto: Crypto;

declare function structuredClone<T>(value: T, options?: { transfer?: unknown[] }): T;
declare function atob(data: string): string;
declare function btoa(data: string): string;

/** sdkbox's own helpers. */
declare const sdkbox: {
  /** A file to return to the client (an image as an image, other types as resources):
   * `return sdkbox.file(csv, { name: "orders.csv", type: "text/csv" })`. A Blob or File in
   * the result is returned the same way. */
  file(data: string | BufferSource | Blob, options?: { name?: string; type?: string }): File;
};

/** A request egress refused or could not complete. */
declare class EgressError extends Error {
  readonly kind: string;
}
/** A request the approval rules or a human refused, or whose approval is still to come. */
declare class PolicyError extends EgressError {}
/** The provider answered with an error status. */
declare class ApiError extends Error {
  readonly status: number;
  readonly body: unknown;
}

declare function setTimeout(callback: (...args: any[]) => void, ms?: number, ...args: any[]): number;
declare function setInterval(callback: (...args: any[]) => void, ms?: number, ...args: any[]): number;
declare function clearTimeout(id?: number): void;
declare function clearInterval(id?: number): void;
declare function queueMicrotask(callback: () => void): void;

/** What `api.request` takes besides the method and path. */
interface SdkboxRequestOptions {
  query?: Record<string, unknown> | URLSearchParams;
  body?: unknown;
  headers?: HeadersInit;
}

/** What `api.paginate` takes besides the method and its parameters. */
interface SdkboxPaginateOptions {
  /** The property of each page that holds its items, when sdkbox cannot tell. */
  items?: string;
}

/** What `api.paginate` gives: the items one at a time, read with `for await (const x of ...)`
 * or collected with `await Array.fromAsync(...)`; not an array (no `.filter`, `.length`,
 * `for ... of` or spreading: each throws, saying so). */
interface SdkboxPages<T> extends AsyncIterableIterator<T> {}

interface ArrayConstructor {
  /** Every item an async iterable gives, in order: `await Array.fromAsync(api.paginate(...))`. */
  fromAsync<T>(items: AsyncIterable<T> | Iterable<T | PromiseLike<T>> | ArrayLike<T | PromiseLike<T>>): Promise<T[]>;
  fromAsync<T, U>(items: AsyncIterable<T> | Iterable<T> | ArrayLike<T>, map: (value: Awaited<T>, index: number) => U): Promise<Awaited<U>[]>;
}

/** The items of a list method's page: `data`, `items`, `result` or the page itself when it
 * is an array (optional or nullable lists too); `any` when sdkbox cannot tell. */
type SdkboxItemOf<L> = NonNullable<L> extends readonly (infer I)[] ? I : any;
type SdkboxItems<R> = R extends readonly (infer I)[] ? I
  : "data" extends keyof R ? SdkboxItemOf<R["data" & keyof R]>
  : "items" extends keyof R ? SdkboxItemOf<R["items" & keyof R]>
  : "result" extends keyof R ? SdkboxItemOf<R["result" & keyof R]>
  : any;
