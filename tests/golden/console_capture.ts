console.log("plain", 1, true, null, undefined);
console.info({ nested: { list: [1, 2] } });
console.warn("careful");
console.error(new RangeError("shown with its stack"));
console.debug(10n, Symbol("s"), () => 1);
console.assert(1 === 2, "math is broken");
return "done";
