const helper = (x: number) => x + 1;

async function main(api: any) {
  return { style: "main", api: typeof api.request, value: helper(1) };
}
