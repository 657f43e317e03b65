async (api) => {
  return { style: "arrow", api: typeof api.request };
}
