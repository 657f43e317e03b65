// A small items API behind Express's method-override middleware, configured the way the
// packages' READMEs show it. tests/it/override.rs puts sdkbox's egress in front of it and checks
// that no request the egress allows reaches a handler as another method; GET /__log tells it
// what the handlers saw.
//
// `node server.mjs` prints {"port": N} on one line once listening on 127.0.0.1, and exits when
// its standard input ends, so a harness that drops the child's stdin stops it.
import express from "express";
import methodOverride from "method-override";
import multer from "multer";

const app = express();

// The body parsers an Express app typically mounts: JSON (with +json types), urlencoded with the
// qs parser (extended), plain text, and multipart fields without files (multer .none()).
app.use(express.json({ type: ["application/json", "application/*+json"] }));
app.use(express.urlencoded({ extended: true }));
app.use(express.text({ type: "text/*" }));
app.use(multer().none());

// Overrides from headers: a getter string starting with "X-" reads that header (first value of a
// comma-joined list).
app.use(methodOverride("X-HTTP-Method-Override"));
app.use(methodOverride("X-HTTP-Method"));
app.use(methodOverride("X-Method-Override"));
// Override from the query: any other getter string is a query key, parsed by Node's querystring
// (not qs, and not Express's req.query).
app.use(methodOverride("_method"));
// Override from the body, exactly as method-override's README shows it.
app.use(
  methodOverride(function (req, res) {
    if (req.body && typeof req.body === "object" && "_method" in req.body) {
      // look in urlencoded POST bodies and delete it
      var method = req.body._method;
      delete req.body._method;
      return method;
    }
  }),
);

// What each handler saw: the method it ran as, the one that came over the wire, and the full path.
const log = [];
app.get("/__log", (req, res) => res.json(log));
app.delete("/__log", (req, res) => {
  log.length = 0;
  res.status(204).end();
});

const items = new Map([
  ["it_1", { id: "it_1", name: "first" }],
  ["it_2", { id: "it_2", name: "second" }],
]);
let nextId = 3;

const v1 = express.Router();
v1.use((req, res, next) => {
  if (req.get("authorization") !== "Bearer test-key") return res.status(401).json({ error: "unauthorized" });
  next();
});

// Records the call before the handler runs, so a call on a missing item is logged too.
const handler = (fn) => (req, res) => {
  log.push({ method: req.method, originalMethod: req.originalMethod, path: req.baseUrl + req.path });
  fn(req, res);
};
const name = (req) => (req.body && typeof req.body.name === "string" ? req.body.name : undefined);
// The item named in the path, or undefined once a 404 is sent.
const found = (req, res) => {
  const item = items.get(req.params.id);
  if (!item) res.status(404).json({ error: "not found" });
  return item;
};

v1.get("/items", handler((req, res) => res.json({ data: [...items.values()] })));
v1.get("/items/:id", handler((req, res) => {
  const item = found(req, res);
  if (item) res.json(item);
}));
v1.post("/items", handler((req, res) => {
  const item = { id: `it_${nextId++}`, name: name(req) ?? "" };
  items.set(item.id, item);
  res.status(201).json(item);
}));
const update = handler((req, res) => {
  const item = found(req, res);
  if (!item) return;
  if (name(req) !== undefined) item.name = name(req);
  res.json(item);
});
v1.post("/items/:id", update);
v1.patch("/items/:id", update);
v1.delete("/items/:id", handler((req, res) => {
  const item = found(req, res);
  if (!item) return;
  items.delete(item.id);
  res.json({ id: item.id, deleted: true });
}));
app.use("/v1", v1);

// JSON errors (a body that does not parse, a file sent to multer .none()) instead of Express's
// HTML page with a stack trace.
app.use((err, req, res, next) => {
  res.status(err.status ?? err.statusCode ?? (err.name === "MulterError" ? 400 : 500));
  res.json({ error: err.message });
});

const server = app.listen(0, "127.0.0.1", () => {
  process.stdout.write(`{"port": ${server.address().port}}\n`);
});
process.stdin.on("end", () => process.exit(0));
process.stdin.on("error", () => process.exit(0));
process.stdin.resume();
