const order: string[] = [];
await new Promise((resolve) => setTimeout(() => { order.push("timeout"); resolve(null); }, 5));
let ticks = 0;
await new Promise<void>((resolve) => {
  const id = setInterval(() => {
    ticks += 1;
    if (ticks === 3) { clearInterval(id); resolve(); }
  }, 1);
});
order.push(`ticks:${ticks}`);
return order;
