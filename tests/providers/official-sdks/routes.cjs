// Prints the route of every method of an official SDK as JSON lines
// {"call": "dns.records.list", "method": "GET", "path": "/zones/{zone_id}/dns_records"}:
// the SDK is instantiated and each method called with probe arguments while the
// client's request function is replaced by one that records the route and throws, so
// nothing is sent. Usage: node routes.cjs stripe|cloudflare
"use strict";

const which = process.argv[2];
const seen = new Set();
const routes = [];

/** The callable public methods of a resource object. */
function methodsOf(resource) {
  const names = new Set(Object.keys(resource));
  for (let p = Object.getPrototypeOf(resource); p && p !== Object.prototype; p = Object.getPrototypeOf(p)) {
    for (const name of Object.getOwnPropertyNames(p)) names.add(name);
  }
  return [...names].filter((n) => n !== "constructor" && !n.startsWith("_") && typeof resource[n] === "function");
}

/** Walks resources by their public lower-case properties, calling `visit` on each. */
function walk(node, path, visit) {
  if (!node || typeof node !== "object" || seen.has(node) || path.length > 8) return;
  seen.add(node);
  visit(node, path);
  for (const key of Object.keys(node)) {
    if (/^[a-z]/.test(key)) walk(node[key], [...path, key], visit);
  }
}

/** An argument that is every parameter at once: any field reads as `{field}`, and it
 * reads as `{arg}` when used as a path segment. */
function probe() {
  return new Proxy({}, {
    get: (_, key) => (key === Symbol.toPrimitive ? () => "{arg}" : typeof key === "string" ? `{${key}}` : undefined),
    ownKeys: () => ["probe"],
    getOwnPropertyDescriptor: (_, key) =>
      key === "probe" ? { value: "x", enumerable: true, configurable: true, writable: true } : undefined,
  });
}

function record(call, method, path) {
  routes.push({ call: call.join("."), method: method.toUpperCase(), path });
}

if (which === "stripe") {
  const stripe = require("stripe")("sk_test_probe");
  walk(stripe, [], (resource, path) => {
    if (typeof resource._makeRequest !== "function") return;
    for (const name of methodsOf(resource)) {
      let spec = null;
      resource._makeRequest = (_args, s) => {
        spec = s;
        throw new Error("probe");
      };
      try {
        resource[name]("a", "b", {});
      } catch {}
      if (spec && spec.fullPath) record([...path, name], spec.method, spec.fullPath);
    }
  });
} else if (which === "cloudflare") {
  const Cloudflare = require("cloudflare");
  walk(new Cloudflare({ apiToken: "probe" }), [], (resource, path) => {
    const client = resource._client;
    if (!client || path.length === 0) return;
    for (const name of methodsOf(resource)) {
      let route = null;
      const saved = {};
      const stop = (method, routePath) => {
        route = { method, path: routePath };
        throw new Error("probe");
      };
      for (const verb of ["get", "post", "put", "patch", "delete", "getAPIList", "requestAPIList"]) {
        saved[verb] = client[verb];
      }
      for (const verb of ["get", "post", "put", "patch", "delete"]) client[verb] = (p) => stop(verb, p);
      client.getAPIList = (p) => stop("get", p);
      client.requestAPIList = (_page, options) => stop(options.method, options.path);
      try {
        resource[name](probe(), probe(), probe(), probe());
      } catch {}
      Object.assign(client, saved);
      if (route) record([...path, name], route.method, route.path);
    }
  });
} else {
  console.error("usage: node routes.cjs stripe|cloudflare");
  process.exit(2);
}
for (const route of routes) console.log(JSON.stringify(route));
