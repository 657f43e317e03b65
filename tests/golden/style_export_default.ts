export default async function (api: { request: Function }) {
  return { style: "export default", api: typeof api.request };
}
