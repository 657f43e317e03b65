// What a script has besides `api`, as the sandbox defines it (src/sandbox/bootstrap.js):
// console, fetch (the provider's origins only), timers and a few web basics. No DOM, no Node.

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
  has(name: string): boolean;
  delete(name: string): void;
  forEach(callback: (value: string, name: string, headers: Headers) => void): void;
  entries(): IterableIterator<[string, string]>;
  keys(): IterableIterator<string>;
  values(): IterableIterator<string>;
  [Symbol.iterator](): IterableIterator<[string, string]>;
}

declare class URLSearchParams implements Iterable<[string, string]> {
  constructor(init?: string | Record<string, string> | [string, string][]);
  append(name: string, value: string): void;
  set(name: string, value: string): void;
  get(name: string): string | null;
  getAll(name: string): string[];
  has(name: string): boolean;
  delete(name: string): void;
  entries(): IterableIterator<[string, string]>;
  [Symbol.iterator](): IterableIterator<[string, string]>;
  toString(): string;
}

declare class Response {
  readonly status: number;
  readonly statusText: string;
  readonly ok: boolean;
  readonly url: string;
  readonly headers: Headers;
  readonly bodyUsed: boolean;
  text(): Promise<string>;
  json(): Promise<any>;
}

interface RequestInit {
  method?: string;
  headers?: HeadersInit;
  body?: string | URLSearchParams | null;
}

declare function fetch(input: string | { toString(): string }, init?: RequestInit): Promise<Response>;

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
