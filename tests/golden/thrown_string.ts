function fail(): never {
  throw "a bare string";
}
return fail();
