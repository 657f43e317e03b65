async function run(api: any) {
  return { style: "run", api: typeof api.request };
}
