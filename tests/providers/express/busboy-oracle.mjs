// The field names busboy 1.6 (what multer, and so Express apps, parse multipart bodies with)
// reads in a body: for tests/it/overrides.rs, which checks that every body busboy reads a
// `_method` field in is refused by sdkbox.
//
// Reads JSON lines {"content_type", "body"} on stdin and prints, for each, one JSON line
// {"names": [...]} (field and file names, in order), or {"error": "..."} when busboy refused.
import busboy from "busboy";
import { createInterface } from "node:readline";

function names(contentType, body) {
  return new Promise((resolve) => {
    const seen = [];
    let parser;
    try {
      parser = busboy({ headers: { "content-type": contentType } });
    } catch (error) {
      resolve({ error: String(error.message) });
      return;
    }
    parser.on("field", (name) => seen.push(name));
    parser.on("file", (name, stream) => {
      seen.push(name);
      stream.resume();
    });
    parser.on("error", (error) => resolve({ error: String(error.message), names: seen }));
    parser.on("close", () => resolve({ names: seen }));
    parser.end(Buffer.from(body, "utf8"));
  });
}

for await (const line of createInterface({ input: process.stdin })) {
  if (!line.trim()) continue;
  const { content_type: contentType, body } = JSON.parse(line);
  console.log(JSON.stringify(await names(contentType, body)));
}
