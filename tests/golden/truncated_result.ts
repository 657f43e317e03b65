const items = Array.from({ length: 5000 }, (_, i) => ({ id: `item_${i}`, text: "lorem ipsum ".repeat(150) }));
return { count: items.length, items };
