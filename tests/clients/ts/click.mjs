// Opens a page in headless Chromium, as a user would, and clicks one button: what the
// approval page test (tests/it/page.rs) uses to approve and deny for real. Speaks the
// DevTools protocol over Chromium's pipe (no extra package). Prints one JSON line:
// {"before": page text, "after": page text after the click}.
//
// Usage: node click.mjs URL BUTTON_ID     (CHROMIUM names the browser; default "chromium")

import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const [url, button] = process.argv.slice(2);
const profile = mkdtempSync(join(tmpdir(), "sdkbox-chromium-"));
const chrome = spawn(
  process.env.CHROMIUM ?? "chromium",
  ["--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run", "--remote-debugging-pipe", `--user-data-dir=${profile}`, "about:blank"],
  { stdio: ["ignore", "ignore", "ignore", "pipe", "pipe"] },
);
const [toChrome, fromChrome] = [chrome.stdio[3], chrome.stdio[4]];

let next = 0;
const waiting = new Map();
let buffered = "";
fromChrome.on("data", (chunk) => {
  buffered += chunk;
  for (let end = buffered.indexOf("\0"); end >= 0; end = buffered.indexOf("\0")) {
    const message = JSON.parse(buffered.slice(0, end));
    buffered = buffered.slice(end + 1);
    waiting.get(message.id)?.(message);
    waiting.delete(message.id);
  }
});
function send(method, params = {}, sessionId) {
  return new Promise((resolve) => {
    const message = { id: ++next, method, params, ...(sessionId ? { sessionId } : {}) };
    waiting.set(message.id, resolve);
    toChrome.write(`${JSON.stringify(message)}\0`);
  });
}

const finish = (code) => {
  chrome.kill("SIGKILL");
  chrome.once("exit", () => {
    // Chromium's helpers may still be writing the profile: removing it is best effort.
    setTimeout(() => {
      try {
        rmSync(profile, { recursive: true, force: true, maxRetries: 5 });
      } catch {}
      process.exit(code);
    }, 200);
  });
};
let evaluate = async () => "";
setTimeout(async () => {
  console.error(`timed out; the page says: ${await evaluate("document.body?.innerText")}`);
  finish(2);
}, 30_000);

const { result: target } = await send("Target.createTarget", { url: "about:blank" });
const { result: attached } = await send("Target.attachToTarget", { targetId: target.targetId, flatten: true });
const session = attached.sessionId;
evaluate = async (expression) =>
  (await send("Runtime.evaluate", { expression, returnByValue: true }, session)).result?.result?.value;
const until = async (expression) => {
  for (;;) {
    const value = await evaluate(expression);
    if (value) return value;
    await new Promise((r) => setTimeout(r, 100));
  }
};

await send("Page.navigate", { url }, session);
await until(`document.readyState === "complete" && document.body.innerText.length > 0`);
const before = await evaluate("document.body.innerText");
await until(`!!document.getElementById(${JSON.stringify(button)})`);
await evaluate(`document.getElementById(${JSON.stringify(button)}).click()`);
const after = await until(`document.getElementById("result")?.innerText`);
console.log(JSON.stringify({ before, after }));
finish(0);
