interface Customer {
  id: string;
  balance: number;
  tier?: Tier;
}

enum Tier {
  Free = "free",
  Pro = "pro",
}

type Summary = { count: number; total: number };

function sum<T>(items: T[], pick: (item: T) => number): number {
  return items.reduce((acc, item) => acc + pick(item), 0);
}

class Ledger {
  #entries: Customer[] = [];
  constructor(private readonly name: string) {}
  add(c: Customer): this {
    this.#entries.push(c);
    return this;
  }
  summary(): Summary {
    return { count: this.#entries.length, total: sum(this.#entries, (c) => c.balance) };
  }
}

const raw: unknown = { id: "c1", balance: 10, tier: Tier.Pro };
const customer = raw as Customer;
const config = { limit: 5 } satisfies Record<string, number>;
const ledger = new Ledger("main").add(customer).add({ id: "c2", balance: 5 });
return { ...ledger.summary(), tier: customer.tier, limit: config.limit, missing: customer?.tier?.length };
