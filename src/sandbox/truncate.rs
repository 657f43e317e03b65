//! Cuts an oversized JSON value down to a character budget while keeping it valid JSON:
//! arrays keep their first items and say how many were dropped, objects keep their first
//! keys, long strings keep their start. The model sees the shape of the data and what
//! is missing, and can ask for less.

use serde_json::{Map, Value};

/// Room kept for the marker that says what was dropped.
const MARKER_ROOM: usize = 64;

/// Size of `value` as compact JSON, in bytes.
pub fn json_size(value: &Value) -> usize {
    struct Counter(usize);
    impl std::io::Write for Counter {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut counter = Counter(0);
    match serde_json::to_writer(&mut counter, value) {
        Ok(()) => counter.0,
        Err(_) => usize::MAX,
    }
}

/// `value` cut to at most about `budget` characters of JSON.
pub fn fit(value: &Value, budget: usize) -> Value {
    if json_size(value) <= budget {
        return value.clone();
    }
    match value {
        Value::String(s) => cut_string(s, budget),
        Value::Array(items) => fit_array(items, budget),
        Value::Object(map) => fit_object(map, budget),
        other => other.clone(),
    }
}

fn cut_string(s: &str, budget: usize) -> Value {
    // Counted as escaped JSON: a control character takes up to six bytes.
    let room = budget.saturating_sub(MARKER_ROOM);
    let mut used = 2;
    let end = s
        .char_indices()
        .find(|(_, c)| {
            used += escaped_len(*c);
            used > room
        })
        .map_or(s.len(), |(i, _)| i);
    let kept = &s[..end];
    let total = s.chars().count();
    Value::String(format!(
        "{kept}… [cut: {} of {total} chars dropped]",
        total - kept.chars().count()
    ))
}

/// Bytes `c` takes inside a JSON string, as serde_json writes it.
fn escaped_len(c: char) -> usize {
    match c {
        '"' | '\\' | '\n' | '\r' | '\t' | '\u{8}' | '\u{c}' => 2,
        c if (c as u32) < 0x20 => 6,
        c => c.len_utf8(),
    }
}

fn fit_array(items: &[Value], budget: usize) -> Value {
    let room = budget.saturating_sub(MARKER_ROOM + 2);
    let mut out = Vec::new();
    let mut used = 0;
    for item in items {
        let left = room.saturating_sub(used);
        if left < 16 {
            break;
        }
        let child = fit(item, left);
        let size = json_size(&child) + 1;
        if used + size > room {
            break;
        }
        used += size;
        out.push(child);
    }
    let dropped = items.len() - out.len();
    if dropped > 0 {
        out.push(Value::String(format!(
            "[… {dropped} more items, {} in all]",
            items.len()
        )));
    }
    Value::Array(out)
}

fn fit_object(map: &Map<String, Value>, budget: usize) -> Value {
    let room = budget.saturating_sub(MARKER_ROOM + 2);
    let mut out = Map::new();
    let mut used = 0;
    for (key, item) in map {
        let key_size = json_size(&Value::String(key.clone())) + 2;
        let left = room.saturating_sub(used + key_size);
        if left < 16 {
            break;
        }
        let child = fit(item, left);
        let size = key_size + json_size(&child);
        if used + size > room {
            break;
        }
        used += size;
        out.insert(key.clone(), child);
    }
    let dropped = map.len() - out.len();
    if dropped > 0 {
        out.insert(
            "…".to_owned(),
            Value::String(format!("[{dropped} more keys, {} in all]", map.len())),
        );
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    proptest::proptest! {
        #[test]
        fn any_value_fits_any_budget_and_stays_json(value in crate::testing::json_value(12), budget in 128usize..6_000) {
            let cut = fit(&value, budget);
            let text = serde_json::to_string(&cut).unwrap_or_default();
            proptest::prop_assert!(text.len() <= budget, "{} > {budget}", text.len());
            let again: Value = serde_json::from_str(&text).unwrap_or(Value::Bool(false));
            proptest::prop_assert_eq!(again, cut);
        }
    }

    #[test]
    fn small_values_are_untouched() {
        let v = json!({"a": [1, 2, 3]});
        assert_eq!(fit(&v, 100), v);
    }

    #[test]
    fn arrays_keep_their_first_items_and_a_count() {
        let v = Value::Array((0..10_000).map(|i| json!({"id": i, "name": "x"})).collect());
        let cut = fit(&v, 2_000);
        assert!(json_size(&cut) <= 2_000, "{}", json_size(&cut));
        let items = cut.as_array().unwrap();
        assert_eq!(items[0], json!({"id": 0, "name": "x"}));
        let marker = items.last().unwrap().as_str().unwrap();
        assert!(marker.ends_with("10000 in all]"), "{marker}");
    }

    #[test]
    fn nested_strings_and_objects_are_cut() {
        let big = "y".repeat(50_000);
        let v = json!({"a": big, "b": 1});
        let cut = fit(&v, 1_000);
        assert!(json_size(&cut) <= 1_000);
        assert!(cut["a"].as_str().unwrap().contains("chars dropped"));
    }
}
