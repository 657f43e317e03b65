async function main() {
  console.log("main ran");
}
await main();
