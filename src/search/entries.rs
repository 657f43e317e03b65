//! What the docs index holds: one entry per operation, per named schema, and per section of
//! the markdown guides beside the spec. Each entry knows its searchable text by field and
//! how to show itself as a hit.

use std::path::Path;

use crate::spec::{Api, Operation, SchemaDoc, Shape, shorten, words};

/// A guide section: a `##` heading of a markdown file and the text under it.
#[derive(Debug, Clone)]
pub struct GuideSection {
    /// The file's name, without extension.
    pub guide: String,
    /// The section heading.
    pub title: String,
    /// The section text.
    pub text: String,
}

/// One searchable thing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Entry {
    /// `api.operations[i]`.
    Operation(usize),
    /// `api.schemas[i]`.
    Schema(usize),
    /// `guides[i]`.
    Guide(usize),
}

/// The text of an entry, by index field.
#[derive(Debug, Default)]
pub struct Fields {
    pub name: String,
    pub path: String,
    pub summary: String,
    pub description: String,
    pub params: String,
    pub verbs: String,
    pub about: String,
    pub group: String,
    pub method: String,
}

/// How much of a resource's description is searched with each operation returning it.
const ABOUT_CHARS: usize = 400;

/// The searchable text of an operation; `about` describes the resource it returns.
pub fn operation_fields(op: &Operation, about: &str) -> Fields {
    let mut params: Vec<String> = op
        .params
        .iter()
        .map(|p| format!("{} {}", p.name, shorten(&p.description, 80)))
        .collect();
    if let Some(Shape::Object { fields, .. }) = op.body.as_ref().map(|b| &*b.shape) {
        params.extend(
            fields
                .iter()
                .map(|f| format!("{} {}", f.name, f.description)),
        );
    }
    let static_path: Vec<&str> = op.path.split('/').filter(|s| !s.starts_with('{')).collect();
    Fields {
        name: format!("{} {} {}", op.id, op.group, op.name),
        path: static_path.join(" "),
        summary: op.summary.clone(),
        description: shorten(&op.description, 600),
        params: params.join(" "),
        verbs: verbs(op),
        about: shorten(about, ABOUT_CHARS),
        group: op.group.clone(),
        method: op.method.clone(),
    }
}

/// Words a person uses for what an operation does, from its method, path and name: an agent
/// asks to "remove" or "fetch", specs say DELETE and GET.
fn verbs(op: &Operation) -> String {
    let item = op.path.trim_end_matches('/').ends_with('}');
    let name_words = words(&op.name);
    let mut out: Vec<&str> = match (op.method.as_str(), item) {
        ("GET", false) => vec!["list", "all", "get", "fetch", "find", "show", "search"],
        ("GET", true) => vec![
            "get", "retrieve", "fetch", "show", "read", "details", "info",
        ],
        ("POST", false) => vec![
            "create", "add", "new", "make", "post", "submit", "register", "open", "start", "send",
        ],
        ("POST", true) => vec!["update", "edit", "modify", "change", "set"],
        ("PUT", _) => vec!["update", "replace", "set", "add", "put"],
        ("PATCH", _) => vec!["update", "edit", "modify", "change"],
        ("DELETE", _) => vec!["delete", "remove", "cancel", "revoke", "destroy"],
        _ => vec![],
    };
    if name_words.iter().any(|w| w == "list") {
        out.extend(["list", "all"]);
    }
    out.join(" ")
}

/// The searchable text of a schema.
pub fn schema_fields(schema: &SchemaDoc) -> Fields {
    let field_names = match &*schema.shape {
        Shape::Object { fields, .. } => fields
            .iter()
            .map(|f| f.name.as_str())
            .collect::<Vec<_>>()
            .join(" "),
        _ => String::new(),
    };
    Fields {
        name: schema.name.clone(),
        summary: shorten(&schema.description, 200),
        description: shorten(&schema.description, 600),
        params: field_names,
        ..Fields::default()
    }
}

/// The searchable text of a guide section.
pub fn guide_fields(section: &GuideSection) -> Fields {
    Fields {
        name: format!("{} {}", section.guide, section.title),
        summary: section.title.clone(),
        description: shorten(&section.text, 2000),
        ..Fields::default()
    }
}

/// Reads `dir/*.md` into sections split at `##` headings (the text before the first heading
/// is a section titled by the `#` heading or the file name).
pub fn read_guides(dir: &Path) -> std::io::Result<Vec<GuideSection>> {
    let mut files: Vec<_> = match std::fs::read_dir(dir) {
        Ok(entries) => entries.filter_map(Result::ok).map(|e| e.path()).collect(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    files.retain(|p| p.extension().is_some_and(|e| e == "md"));
    files.sort();
    let mut sections = Vec::new();
    for file in files {
        let guide = file
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        sections.extend(split_guide(&guide, &std::fs::read_to_string(&file)?));
    }
    Ok(sections)
}

/// Splits one markdown guide at its `##` headings.
pub fn split_guide(guide: &str, markdown: &str) -> Vec<GuideSection> {
    let mut sections = Vec::new();
    let mut title = guide.to_owned();
    let mut text = String::new();
    for line in markdown.lines() {
        if let Some(heading) = line.strip_prefix("## ") {
            if !text.trim().is_empty() {
                sections.push(GuideSection {
                    guide: guide.to_owned(),
                    title: title.clone(),
                    text: text.trim().to_owned(),
                });
            }
            title = heading.trim().to_owned();
            text.clear();
        } else if let Some(heading) = line.strip_prefix("# ") {
            title = heading.trim().to_owned();
        } else {
            text.push_str(line);
            text.push('\n');
        }
    }
    if !text.trim().is_empty() {
        sections.push(GuideSection {
            guide: guide.to_owned(),
            title,
            text: text.trim().to_owned(),
        });
    }
    sections
}

/// All entries of an API and its guides, in index order.
pub fn all(api: &Api, guides: &[GuideSection]) -> Vec<Entry> {
    (0..api.operations.len())
        .map(Entry::Operation)
        .chain((0..api.schemas.len()).map(Entry::Schema))
        .chain((0..guides.len()).map(Entry::Guide))
        .collect()
}
