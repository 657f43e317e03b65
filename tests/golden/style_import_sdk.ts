import { api } from "sdkbox";

export default async () => ({ style: "import", api: typeof api.request });
