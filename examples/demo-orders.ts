// What a model writes for the demo provider (`sdkbox serve --demo`): the three largest paid
// orders, with their customers' emails, joined server-side in one call.
const paid: { id: string; amount: number; customer: string }[] = [];
for await (const order of api.paginate(api.orders.list, { status: "paid", limit: 100 })) {
  paid.push({ id: order.id, amount: order.amount, customer: order.customer });
}
const top = paid.sort((a, b) => b.amount - a.amount).slice(0, 3);
const customers = await Promise.all(top.map((o) => api.customers.get({ customer_id: o.customer })));
return top.map((o, i) => ({ order: o.id, amount: o.amount / 100, email: customers[i].email }));
