//! How an entry is shown to the model: one compact line that says how to call it, and on
//! request the signature, response shape and an example call.

use serde::Serialize;

use super::entries::{Entry, GuideSection};
use crate::sdk::{call_hint, signature, type_of};
use crate::spec::{Api, Location, Operation, Shape, first_sentence, shorten};

/// How much a hit shows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Detail {
    /// One line and the required parameters.
    #[default]
    Compact,
    /// Also the TypeScript signature, the response shape, an example and the description.
    Full,
}

/// One search result.
#[derive(Debug, Clone, Serialize)]
pub struct Hit {
    /// `operation`, `schema` or `guide`.
    pub kind: &'static str,
    /// For operations: `api.<group>.<method>`; schemas: the name; guides: `guide › section`.
    pub id: String,
    /// The text shown to the model.
    pub text: String,
    /// The relevance score.
    pub score: f32,
}

/// Renders `entry` at `detail`.
pub fn render(api: &Api, guides: &[GuideSection], entry: Entry, detail: Detail, score: f32) -> Hit {
    match entry {
        Entry::Operation(i) => {
            let op = &api.operations[i];
            Hit {
                kind: "operation",
                id: format!("api.{}.{}", op.group, op.name),
                text: operation(op, detail),
                score,
            }
        }
        Entry::Schema(i) => {
            let schema = &api.schemas[i];
            let shape = match detail {
                Detail::Compact => field_list(&schema.shape),
                Detail::Full => type_of(&schema.shape, 2),
            };
            let about = first_sentence(&schema.description, 160);
            Hit {
                kind: "schema",
                id: schema.name.clone(),
                text: format!("schema {}  {shape}  {about}", schema.name)
                    .trim_end()
                    .to_owned(),
                score,
            }
        }
        Entry::Guide(i) => {
            let section = &guides[i];
            let body = match detail {
                Detail::Compact => shorten(&section.text.replace('\n', " "), 240),
                Detail::Full => shorten(&section.text, 2000),
            };
            let id = format!("{} › {}", section.guide, section.title);
            Hit {
                kind: "guide",
                text: format!("guide {id}\n  {body}"),
                id,
                score,
            }
        }
    }
}

fn operation(op: &Operation, detail: Detail) -> String {
    let deprecated = if op.deprecated { "  (deprecated)" } else { "" };
    let mut text = format!(
        "{} {}  api.{}.{}({})  {}{deprecated}",
        op.method,
        op.path,
        op.group,
        op.name,
        call_hint(op),
        shorten(&op.summary, 120)
    );
    let required = required(op);
    if !required.is_empty() {
        text.push_str(&format!("\n  required: {}", required.join(", ")));
    }
    let hidden = op.body_fields_named_like_params();
    if !hidden.is_empty() {
        let names = hidden.join(", ");
        text.push_str(&format!(
            "\n  body fields named like parameters ({names}) go under body: {{ ..., body: {{ {names} }} }}"
        ));
    }
    if detail == Detail::Full {
        text.push_str(&format!("\n  signature: {}", signature(op)));
        text.push_str(&format!(
            "\n  example: const result = await api.{}.{}({});",
            op.group,
            op.name,
            example(op)
        ));
        if !op.description.is_empty() && op.description != op.summary {
            text.push_str(&format!(
                "\n  description: {}",
                shorten(&op.description, 400)
            ));
        }
    }
    text
}

/// `customer (string), amount (integer)`: what a call must pass.
fn required(op: &Operation) -> Vec<String> {
    let mut out: Vec<String> = op
        .params
        .iter()
        .filter(|p| p.required && p.location != Location::Header)
        .map(|p| format!("{} ({})", p.name, type_of(&p.shape, 0)))
        .collect();
    if let Some(body) = &op.body {
        match &*body.shape {
            Shape::Object { fields, .. } => {
                out.extend(
                    fields
                        .iter()
                        .filter(|f| f.required)
                        .map(|f| format!("{} ({})", f.name, type_of(&f.shape, 0))),
                );
            }
            shape if body.required => out.push(format!("body ({})", type_of(shape, 0))),
            _ => {}
        }
    }
    out
}

/// An example argument with the required parameters filled in.
fn example(op: &Operation) -> String {
    let mut parts: Vec<String> = op
        .params
        .iter()
        .filter(|p| p.required && p.location != Location::Header)
        .map(|p| format!("{}: {}", p.name, placeholder(&p.name, &p.shape)))
        .collect();
    if let Some(Shape::Object { fields, .. }) = op.body.as_ref().map(|b| &*b.shape) {
        parts.extend(
            fields
                .iter()
                .filter(|f| f.required)
                .map(|f| format!("{}: {}", f.name, placeholder(&f.name, &f.shape))),
        );
    }
    if parts.is_empty() {
        String::new()
    } else {
        format!("{{ {} }}", parts.join(", "))
    }
}

fn placeholder(name: &str, shape: &Shape) -> String {
    match shape {
        Shape::String { values } if !values.is_empty() => format!("\"{}\"", values[0]),
        Shape::Integer | Shape::Number => "1".into(),
        Shape::Boolean => "true".into(),
        Shape::Array(_) => "[]".into(),
        Shape::Object { .. } => "{}".into(),
        Shape::OneOf(options) => options
            .first()
            .map_or("null".into(), |o| placeholder(name, o)),
        _ => format!("\"<{name}>\""),
    }
}

fn field_list(shape: &Shape) -> String {
    match shape {
        Shape::Object { fields, .. } if !fields.is_empty() => {
            let names: Vec<&str> = fields.iter().take(10).map(|f| f.name.as_str()).collect();
            let more = if fields.len() > 10 { ", ..." } else { "" };
            format!("{{ {}{more} }}", names.join(", "))
        }
        other => type_of(other, 0),
    }
}
