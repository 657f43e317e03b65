//! JSON Schema to [`Shape`], with local `$ref`s resolved. Each named schema is converted once
//! and shared; a schema met again while it is being converted becomes `Recursive`.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use serde_json::Value;

use super::model::{Field, Shape, Views};
use super::text;

/// A `$ref` that could not be followed.
#[derive(Debug, Clone)]
pub struct RefError(pub String);

/// Resolves references and converts schemas against one spec document.
pub struct Schemas<'a> {
    root: &'a Value,
    named: HashMap<String, Arc<Shape>>,
    converting: HashSet<String>,
    /// The shapes as requests and responses carry them, shared by every operation.
    pub views: Views,
}

/// Values of an enum kept as a type; a longer enum accepts any string.
const MAX_ENUM_VALUES: usize = 1_000;

impl<'a> Schemas<'a> {
    /// A converter for `root`.
    pub fn new(root: &'a Value) -> Self {
        Self {
            root,
            named: HashMap::new(),
            converting: HashSet::new(),
            views: Views::default(),
        }
    }

    /// Follows `$ref` chains from `value` to what they point at.
    pub fn resolve<'v>(&self, value: &'v Value) -> Result<&'v Value, RefError>
    where
        'a: 'v,
    {
        let mut current = value;
        for _ in 0..32 {
            let Some(reference) = current.get("$ref").and_then(Value::as_str) else {
                return Ok(current);
            };
            current = self.pointer(reference)?;
        }
        Err(RefError("a chain of more than 32 $refs".into()))
    }

    fn pointer(&self, reference: &str) -> Result<&'a Value, RefError> {
        let Some(pointer) = reference.strip_prefix('#') else {
            return Err(RefError(format!(
                "`{reference}` points outside this file; only local $refs (#/...) are supported"
            )));
        };
        self.root
            .pointer(pointer)
            .ok_or_else(|| RefError(format!("`{reference}` points at nothing")))
    }

    /// The shape of `schema`.
    pub fn shape(&mut self, schema: &Value) -> Result<Arc<Shape>, RefError> {
        if let Some(reference) = schema.get("$ref").and_then(Value::as_str) {
            return self.named_shape(reference);
        }
        self.convert(schema).map(Arc::new)
    }

    fn named_shape(&mut self, reference: &str) -> Result<Arc<Shape>, RefError> {
        if let Some(shape) = self.named.get(reference) {
            return Ok(shape.clone());
        }
        let name = reference.rsplit('/').next().unwrap_or(reference).to_owned();
        if self.converting.contains(reference) {
            return Ok(Arc::new(Shape::Recursive(name)));
        }
        let target = self.pointer(reference)?;
        self.converting.insert(reference.to_owned());
        let converted = self.shape(target);
        self.converting.remove(reference);
        let shape = converted?;
        self.named.insert(reference.to_owned(), shape.clone());
        Ok(shape)
    }

    fn convert(&mut self, schema: &Value) -> Result<Shape, RefError> {
        if let Some(parts) = schema.get("allOf").and_then(Value::as_array) {
            return self.all_of(parts, schema);
        }
        for key in ["oneOf", "anyOf"] {
            if let Some(parts) = schema.get(key).and_then(Value::as_array) {
                let shapes = parts
                    .iter()
                    .map(|p| self.shape(p))
                    .collect::<Result<Vec<_>, _>>()?;
                return Ok(one_of(shapes, nullable(schema)));
            }
        }
        let types: Vec<&str> = match schema.get("type") {
            Some(Value::String(t)) => vec![t.as_str()],
            Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
            _ if schema.get("properties").is_some() => vec!["object"],
            _ if schema.get("items").is_some() => vec!["array"],
            _ if schema.get("enum").is_some() => vec!["string"],
            _ => vec![],
        };
        let mut shapes = Vec::new();
        for kind in &types {
            shapes.push(Arc::new(self.single(kind, schema)?));
        }
        Ok(match shapes.len() {
            0 => Shape::Any,
            _ => one_of(shapes, nullable(schema)),
        })
    }

    fn single(&mut self, kind: &str, schema: &Value) -> Result<Shape, RefError> {
        Ok(match kind {
            "string" if schema.get("format").and_then(Value::as_str) == Some("binary") => {
                Shape::Bytes
            }
            "string" => Shape::String {
                // An enum of thousands is a list, not a type: any string is accepted (and the
                // values are not copied into every signature and hit).
                values: schema
                    .get("enum")
                    .and_then(Value::as_array)
                    .filter(|vs| vs.len() <= MAX_ENUM_VALUES)
                    .map(|vs| {
                        vs.iter()
                            .filter_map(Value::as_str)
                            .map(str::to_owned)
                            .collect()
                    })
                    .unwrap_or_default(),
            },
            "integer" => Shape::Integer,
            "number" => Shape::Number,
            "boolean" => Shape::Boolean,
            "null" => Shape::Null,
            "array" => Shape::Array(match schema.get("items") {
                Some(items) => self.shape(items)?,
                None => Arc::new(Shape::Any),
            }),
            "object" => self.object(schema)?,
            _ => Shape::Any,
        })
    }

    fn object(&mut self, schema: &Value) -> Result<Shape, RefError> {
        let required: Vec<&str> = schema
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let mut fields = Vec::new();
        // A property named like `<any part name>` (Cloudflare's Worker uploads) stands for
        // keys of the caller's choosing: it is what other keys are.
        let mut placeholder = None;
        if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
            for (name, property) in properties {
                if name.starts_with('<') && name.ends_with('>') {
                    placeholder = Some(self.shape(property)?);
                    continue;
                }
                let described = self.resolve(property)?;
                let description = described
                    .get("description")
                    .and_then(Value::as_str)
                    .map(|d| text::first_sentence(&text::plain(d), 160))
                    .unwrap_or_default();
                let flag = |key: &str| described.get(key).and_then(Value::as_bool) == Some(true);
                let (read_only, write_only) = (flag("readOnly"), flag("writeOnly"));
                fields.push(Field {
                    name: name.clone(),
                    shape: self.shape(property)?,
                    required: required.contains(&name.as_str()),
                    description,
                    read_only,
                    write_only,
                });
            }
        }
        // An object without properties is open unless it says `additionalProperties: false`
        // (Stripe's reads: no fields at all, so a misspelled parameter is refused).
        let additional = match schema.get("additionalProperties") {
            _ if placeholder.is_some() => placeholder,
            Some(Value::Bool(true)) => Some(Arc::new(Shape::Any)),
            Some(extra @ Value::Object(_)) => Some(self.shape(extra)?),
            Some(Value::Bool(false)) => None,
            _ if fields.is_empty() => Some(Arc::new(Shape::Any)),
            _ => None,
        };
        Ok(Shape::Object { fields, additional })
    }

    fn all_of(&mut self, parts: &[Value], schema: &Value) -> Result<Shape, RefError> {
        let mut fields: Vec<Field> = Vec::new();
        let mut additional = None;
        let mut other = None;
        for part in parts {
            match &*self.shape(part)? {
                Shape::Object {
                    fields: more,
                    additional: extra,
                } => {
                    for field in more {
                        if !fields.iter().any(|f| f.name == field.name) {
                            fields.push(field.clone());
                        }
                    }
                    additional = additional.or_else(|| extra.clone());
                }
                shape => other = other.or_else(|| Some(shape.clone())),
            }
        }
        // The schema's own properties beside `allOf` override the parts' fields of the same
        // name (a create body's `origin` with its secrets over the stored one's), and its
        // `required` applies to every field, the parts' too.
        if let Some(Value::Object(_)) = schema.get("properties")
            && let Shape::Object { fields: own, .. } = self.object(schema)?
        {
            fields.retain(|f| !own.iter().any(|o| o.name == f.name));
            fields.extend(own);
        }
        // So does each part's `required`, a part that only requires fields of another
        // (`allOf: [monitor, {required: [expected_codes]}]`) included.
        let mut required: Vec<String> = Vec::new();
        for listed in std::iter::once(schema)
            .chain(parts.iter().filter_map(|p| self.resolve(p).ok()))
            .filter_map(|s| s.get("required").and_then(Value::as_array))
        {
            required.extend(listed.iter().filter_map(Value::as_str).map(str::to_owned));
        }
        for field in &mut fields {
            if required.contains(&field.name) {
                field.required = true;
            }
        }
        Ok(match (fields.is_empty(), other) {
            (true, Some(shape)) => shape,
            _ => Shape::Object { fields, additional },
        })
    }
}

fn nullable(schema: &Value) -> bool {
    schema.get("nullable").and_then(Value::as_bool) == Some(true)
}

fn one_of(mut shapes: Vec<Arc<Shape>>, nullable: bool) -> Shape {
    if nullable {
        shapes.push(Arc::new(Shape::Null));
    }
    shapes.dedup();
    match shapes.len() {
        0 => Shape::Any,
        1 => (*shapes[0]).clone(),
        _ => Shape::OneOf(shapes),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn refs_all_of_and_recursion() {
        let root = json!({"components": {"schemas": {
            "Node": {"type": "object", "required": ["id"], "properties": {
                "id": {"type": "string"}, "children": {"type": "array", "items": {"$ref": "#/components/schemas/Node"}}}},
            "Named": {"allOf": [{"$ref": "#/components/schemas/Node"}, {"type": "object", "properties": {"name": {"type": ["string", "null"]}}}]}
        }}});
        let mut schemas = Schemas::new(&root);
        let shape = schemas
            .shape(&json!({"$ref": "#/components/schemas/Named"}))
            .unwrap();
        let Shape::Object { fields, .. } = &*shape else {
            panic!("{shape:?}")
        };
        let names: Vec<_> = fields.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["id", "children", "name"]);
        assert!(fields[0].required);
        assert_eq!(
            *fields[1].shape,
            Shape::Array(Arc::new(Shape::Recursive("Node".into())))
        );
        let err = schemas
            .shape(&json!({"$ref": "#/components/schemas/Missing"}))
            .unwrap_err();
        assert!(err.0.contains("points at nothing"));
    }
}
