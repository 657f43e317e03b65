const cyclic: any = { name: "root" };
cyclic.self = cyclic;
const shared = { x: 1 };
return {
  big: 2n ** 70n,
  nothing: undefined,
  list: [undefined, 1],
  fn: function namedFn() {},
  cyclic,
  twice: [shared, shared],
  map: new Map([["a", 1]]),
  set: new Set([1, 2]),
  date: new Date(0),
  nan: NaN,
  error: new TypeError("as data"),
  promise: Promise.resolve(1),
};
