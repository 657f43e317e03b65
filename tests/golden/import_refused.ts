import { readFileSync } from "node:fs";
return readFileSync("/etc/passwd", "utf8");
