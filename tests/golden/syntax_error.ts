const customers = await api.request("GET", "/customers");
const names = customers.map((c) => c.name;
return names;
