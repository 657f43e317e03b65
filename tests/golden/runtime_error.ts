interface Order {
  id: string;
  lines: { qty: number }[];
}

type Totals = Record<string, number>;

function total(order: Order): number {
  return order.lines.reduce((n, line) => n + line.qty, 0);
}

const orders = [{ id: "o1", lines: [{ qty: 2 }] }, { id: "o2" }] as Order[];
const totals: Totals = {};
for (const order of orders) {
  totals[order.id] = total(order);
}
return totals;
