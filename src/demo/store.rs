//! The demo provider's data, in memory: seeded the same way on every start, changed by calls.

use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::{Value, json};

/// A refused call: the status and the provider-style error body it becomes.
#[derive(Debug)]
pub struct Failure {
    /// HTTP status.
    pub status: StatusCode,
    /// The error's `type`.
    pub kind: &'static str,
    /// What was wrong.
    pub message: String,
    /// The parameter at fault.
    pub param: Option<&'static str>,
}

/// Query parameters of the list operations.
#[derive(Debug, Default, Deserialize)]
pub struct ListQuery {
    limit: Option<String>,
    starting_after: Option<String>,
    email: Option<String>,
    customer: Option<String>,
    status: Option<String>,
    order: Option<String>,
    active: Option<String>,
}

/// Every object by kind, in creation order.
pub struct Store {
    customers: Vec<Value>,
    products: Vec<Value>,
    orders: Vec<Value>,
    refunds: Vec<Value>,
    /// Uploaded files.
    pub files: super::files::Files,
    clock: i64,
}

const NAMES: &[&str] = &[
    "Ada Lovelace",
    "Grace Hopper",
    "Alan Turing",
    "Katherine Johnson",
    "Edsger Dijkstra",
    "Barbara Liskov",
    "Donald Knuth",
    "Margaret Hamilton",
    "Ken Thompson",
    "Frances Allen",
    "John McCarthy",
    "Radia Perlman",
];
const PRODUCTS: &[(&str, i64, bool)] = &[
    ("Anvil", 4_999, true),
    ("Rocket skates", 12_900, true),
    ("Giant magnet", 7_450, true),
    ("Tornado seeds", 1_299, true),
    ("Earthquake pills", 899, false),
    ("Bird seed", 350, true),
];
const STATUSES: &[&str] = &["paid", "shipped", "pending", "paid", "cancelled", "shipped"];
/// Every status an order can have, as the spec's `OrderStatus` lists them.
const ORDER_STATUSES: &[&str] = &["pending", "paid", "shipped", "cancelled"];

fn bad(message: String, param: &'static str) -> Failure {
    Failure {
        status: StatusCode::BAD_REQUEST,
        kind: "invalid_request_error",
        message,
        param: Some(param),
    }
}

/// The next id of a kind: one past the highest in use, so ids are never reused after a delete.
fn next_id(prefix: &str, items: &[Value]) -> String {
    let highest = items
        .iter()
        .filter_map(|o| {
            o["id"]
                .as_str()?
                .strip_prefix(prefix)?
                .strip_prefix('_')?
                .parse::<u32>()
                .ok()
        })
        .max()
        .unwrap_or(0);
    format!("{prefix}_{:03}", highest + 1)
}

impl Store {
    /// The demo's starting data: 12 customers, 6 products, 30 orders, 2 refunds.
    pub fn seeded() -> Self {
        let mut store = Self {
            customers: Vec::new(),
            products: Vec::new(),
            orders: Vec::new(),
            refunds: Vec::new(),
            files: super::files::Files::default(),
            clock: 1_767_225_600,
        };
        for (i, name) in NAMES.iter().enumerate() {
            let email = format!(
                "{}@example.com",
                name.split(' ').next().unwrap_or("user").to_lowercase()
            );
            let id = format!("cus_{:03}", i + 1);
            let created = store.tick();
            store.customers.push(json!({"id": id, "object": "customer", "email": email, "name": name, "created": created, "metadata": {}}));
        }
        for (i, (name, amount, active)) in PRODUCTS.iter().enumerate() {
            store.products.push(json!({
                "id": format!("prod_{:03}", i + 1), "object": "product", "name": name,
                "description": format!("Acme {}", name.to_lowercase()), "unit_amount": amount, "currency": "usd", "active": active,
            }));
        }
        for i in 0..30 {
            let product = &PRODUCTS[i % PRODUCTS.len()];
            let quantity = (i % 3 + 1) as i64;
            let created = store.tick();
            store.orders.push(json!({
                "id": format!("ord_{:03}", i + 1), "object": "order",
                "customer": format!("cus_{:03}", i % NAMES.len() + 1),
                "items": [{"product": format!("prod_{:03}", i % PRODUCTS.len() + 1), "quantity": quantity, "unit_amount": product.1}],
                "amount": product.1 * quantity, "amount_refunded": 0, "currency": "usd",
                "status": STATUSES[i % STATUSES.len()], "created": created,
            }));
        }
        for (order, amount, reason) in [
            ("ord_002", 4_999, "requested_by_customer"),
            ("ord_007", 2_000, "duplicate"),
        ] {
            let _ = store.refund(order, Some(amount), Some(reason));
        }
        store
    }

    /// The time of the next change: an hour after the last.
    pub fn tick(&mut self) -> i64 {
        self.clock += 3_600;
        self.clock
    }

    fn all(&self, kind: &str) -> &Vec<Value> {
        match kind {
            "customer" => &self.customers,
            "product" => &self.products,
            "order" => &self.orders,
            _ => &self.refunds,
        }
    }

    /// One object by id, or a 404 that names it.
    pub fn get(&self, kind: &str, id: &str) -> Result<Value, Failure> {
        self.all(kind)
            .iter()
            .find(|o| o["id"] == id)
            .cloned()
            .ok_or_else(|| Failure {
                status: StatusCode::NOT_FOUND,
                kind: "invalid_request_error",
                message: format!("No such {kind}: '{id}'"),
                param: None,
            })
    }

    fn page(items: Vec<&Value>, query: &ListQuery) -> Result<Value, Failure> {
        let limit = match &query.limit {
            None => 10,
            Some(text) => match text.parse::<usize>() {
                Ok(n) if (1..=100).contains(&n) => n,
                _ => {
                    return Err(bad(
                        format!("limit must be an integer from 1 to 100; got '{text}'"),
                        "limit",
                    ));
                }
            },
        };
        let start = match &query.starting_after {
            None => 0,
            Some(id) => match items.iter().position(|o| o["id"] == id.as_str()) {
                Some(i) => i + 1,
                None => {
                    return Err(bad(
                        format!("starting_after: no object '{id}' in this list"),
                        "starting_after",
                    ));
                }
            },
        };
        let data: Vec<Value> = items
            .iter()
            .skip(start)
            .take(limit)
            .map(|o| (*o).clone())
            .collect();
        let has_more = start + data.len() < items.len();
        Ok(json!({"object": "list", "data": data, "has_more": has_more}))
    }

    pub fn list_customers(&self, q: &ListQuery) -> Result<Value, Failure> {
        let items = self
            .customers
            .iter()
            .filter(|c| q.email.as_ref().is_none_or(|e| c["email"] == e.as_str()))
            .collect();
        Self::page(items, q)
    }

    pub fn list_products(&self, q: &ListQuery) -> Result<Value, Failure> {
        let active = match q.active.as_deref() {
            None => None,
            Some("true") => Some(true),
            Some("false") => Some(false),
            Some(other) => {
                return Err(bad(
                    format!("active must be true or false; got '{other}'"),
                    "active",
                ));
            }
        };
        let items = self
            .products
            .iter()
            .filter(|p| active.is_none_or(|a| p["active"] == a))
            .collect();
        Self::page(items, q)
    }

    pub fn list_orders(&self, q: &ListQuery) -> Result<Value, Failure> {
        if let Some(status) = q.status.as_deref()
            && !ORDER_STATUSES.contains(&status)
        {
            return Err(bad(
                format!(
                    "status must be one of {}; got '{status}'",
                    ORDER_STATUSES.join(", ")
                ),
                "status",
            ));
        }
        let items = self
            .orders
            .iter()
            .filter(|o| {
                q.customer
                    .as_ref()
                    .is_none_or(|c| o["customer"] == c.as_str())
            })
            .filter(|o| q.status.as_ref().is_none_or(|s| o["status"] == s.as_str()))
            .collect();
        Self::page(items, q)
    }

    pub fn list_refunds(&self, q: &ListQuery) -> Result<Value, Failure> {
        let items = self
            .refunds
            .iter()
            .filter(|r| q.order.as_ref().is_none_or(|o| r["order"] == o.as_str()))
            .collect();
        Self::page(items, q)
    }

    pub fn create_customer(&mut self, body: &Value) -> Result<Value, Failure> {
        let email = body["email"]
            .as_str()
            .filter(|e| e.contains('@'))
            .ok_or_else(|| {
                bad(
                    "email is required and must be an email address".into(),
                    "email",
                )
            })?;
        let id = next_id("cus", &self.customers);
        let created = self.tick();
        let customer = json!({
            "id": id, "object": "customer", "email": email, "name": body.get("name").cloned().unwrap_or(Value::Null),
            "created": created, "metadata": body.get("metadata").cloned().unwrap_or(json!({})),
        });
        self.customers.push(customer.clone());
        Ok(customer)
    }

    pub fn update_customer(&mut self, id: &str, body: &Value) -> Result<Value, Failure> {
        self.get("customer", id)?;
        let customer = self
            .customers
            .iter_mut()
            .find(|c| c["id"] == id)
            .ok_or_else(|| bad("vanished".into(), "id"))?;
        if let Some(email) = body.get("email")
            && !email.as_str().is_some_and(|e| e.contains('@'))
        {
            return Err(bad("email must be an email address".into(), "email"));
        }
        if body
            .get("name")
            .is_some_and(|n| !n.is_string() && !n.is_null())
        {
            return Err(bad("name must be a string or null".into(), "name"));
        }
        if body.get("metadata").is_some_and(|m| !m.is_object()) {
            return Err(bad("metadata must be an object".into(), "metadata"));
        }
        for key in ["email", "name", "metadata"] {
            if let Some(value) = body.get(key) {
                customer[key] = value.clone();
            }
        }
        Ok(customer.clone())
    }

    pub fn delete_customer(&mut self, id: &str) -> Result<Value, Failure> {
        self.get("customer", id)?;
        self.customers.retain(|c| c["id"] != id);
        Ok(json!({"id": id, "object": "customer", "deleted": true}))
    }

    pub fn create_order(&mut self, body: &Value) -> Result<Value, Failure> {
        let customer = body["customer"]
            .as_str()
            .ok_or_else(|| bad("customer is required".into(), "customer"))?;
        self.get("customer", customer)?;
        let items = body["items"]
            .as_array()
            .filter(|i| !i.is_empty())
            .ok_or_else(|| bad("items must be a non-empty array".into(), "items"))?;
        let mut lines = Vec::new();
        let mut amount = 0;
        for (i, item) in items.iter().enumerate() {
            let product_id = item["product"]
                .as_str()
                .ok_or_else(|| bad(format!("items[{i}].product is required"), "items"))?;
            let product = self.get("product", product_id)?;
            if product["active"] != true {
                return Err(bad(
                    format!("product '{product_id}' is not for sale"),
                    "items",
                ));
            }
            let quantity = item["quantity"]
                .as_i64()
                .filter(|q| *q >= 1)
                .ok_or_else(|| {
                    bad(
                        format!("items[{i}].quantity must be an integer >= 1"),
                        "items",
                    )
                })?;
            let unit = product["unit_amount"].as_i64().unwrap_or(0);
            amount += unit * quantity;
            lines.push(json!({"product": product_id, "quantity": quantity, "unit_amount": unit}));
        }
        let currency = body["currency"].as_str().unwrap_or("usd");
        if !["usd", "eur"].contains(&currency) {
            return Err(bad(
                format!("currency must be usd or eur; got '{currency}'"),
                "currency",
            ));
        }
        let created = self.tick();
        let order = json!({
            "id": next_id("ord", &self.orders), "object": "order", "customer": customer, "items": lines,
            "amount": amount, "amount_refunded": 0, "currency": currency, "status": "pending", "created": created,
        });
        self.orders.push(order.clone());
        Ok(order)
    }

    pub fn cancel_order(&mut self, id: &str) -> Result<Value, Failure> {
        let order = self.get("order", id)?;
        let status = order["status"].as_str().unwrap_or_default();
        if !["pending", "paid"].contains(&status) {
            return Err(bad(
                format!(
                    "order '{id}' is {status} and cannot be cancelled; only pending and paid orders can"
                ),
                "order",
            ));
        }
        let order = self
            .orders
            .iter_mut()
            .find(|o| o["id"] == id)
            .ok_or_else(|| bad("vanished".into(), "id"))?;
        order["status"] = json!("cancelled");
        Ok(order.clone())
    }

    pub fn create_refund(&mut self, body: &Value) -> Result<Value, Failure> {
        let order = body["order"]
            .as_str()
            .ok_or_else(|| bad("order is required".into(), "order"))?;
        let reason = match body.get("reason").and_then(Value::as_str) {
            Some(r) if ["duplicate", "fraudulent", "requested_by_customer"].contains(&r) => Some(r),
            Some(r) => {
                return Err(bad(
                    format!(
                        "reason must be duplicate, fraudulent or requested_by_customer; got '{r}'"
                    ),
                    "reason",
                ));
            }
            None => None,
        };
        self.refund(order, body.get("amount").and_then(Value::as_i64), reason)
    }

    fn refund(
        &mut self,
        order_id: &str,
        amount: Option<i64>,
        reason: Option<&str>,
    ) -> Result<Value, Failure> {
        let order = self.get("order", order_id)?;
        let status = order["status"].as_str().unwrap_or_default();
        if !["paid", "shipped"].contains(&status) {
            return Err(bad(
                format!(
                    "order '{order_id}' is {status}; only paid or shipped orders can be refunded"
                ),
                "order",
            ));
        }
        let left =
            order["amount"].as_i64().unwrap_or(0) - order["amount_refunded"].as_i64().unwrap_or(0);
        let amount = amount.unwrap_or(left);
        if amount < 1 || amount > left {
            return Err(bad(
                format!(
                    "amount must be between 1 and {left}, what is left to refund on '{order_id}'"
                ),
                "amount",
            ));
        }
        let created = self.tick();
        let refund = json!({
            "id": next_id("re", &self.refunds), "object": "refund", "order": order_id,
            "amount": amount, "reason": reason, "status": "succeeded", "created": created,
        });
        if let Some(o) = self.orders.iter_mut().find(|o| o["id"] == order_id) {
            let refunded = o["amount_refunded"].as_i64().unwrap_or(0);
            o["amount_refunded"] = json!(refunded + amount);
        }
        self.refunds.push(refund.clone());
        Ok(refund)
    }
}
