//! Provider playbooks as MCP skills (the `io.modelcontextprotocol/skills` extension,
//! SEP-2640): `skills/list`, `skills/get`, and each skill's files through `resources/read`
//! at `skill://<name>/<path>`.
//!
//! Two kinds: the provider's own skill, written from its spec and guides at startup
//! (`builtin.rs`), and the operator's skills, read once at startup from `[skills] dir`
//! (`dir.rs`: one folder per skill with its `SKILL.md`). Nothing is read from disk after
//! startup, so no request reaches the file system; every skill is bounded in files and
//! bytes. Their sections are also searched by `search_docs`.

mod builtin;
mod dir;

use std::path::Path;

use rmcp::model::{
    GetSkillResult, ListSkillsResult, ReadResourceResult, ResourceContents, Skill,
    SkillFrontmatter, SkillResource, SkillResources,
};

pub use dir::SkillsError;

use crate::search::{GuideSection, split_guide};
use crate::spec::Api;

/// The scheme of skill files' URIs.
const SCHEME: &str = "skill://";

/// The skills a server serves, read once.
pub struct Skills {
    skills: Vec<Loaded>,
}

/// One skill: its manifest entry and its files, `SKILL.md` first.
struct Loaded {
    skill: Skill,
    /// The `SKILL.md` text after its frontmatter, for search.
    body: String,
    files: Vec<File>,
}

/// One file of a skill.
struct File {
    uri: String,
    media_type: String,
    bytes: Vec<u8>,
}

impl Skills {
    /// The provider's own skill (named after `provider`, written from `api` and `guides`)
    /// and the operator's skills in `dir`, if given.
    pub fn build(
        provider: &str,
        api: &Api,
        guides: &[GuideSection],
        dir: Option<&Path>,
    ) -> Result<Self, SkillsError> {
        let name = builtin::skill_name(provider);
        let frontmatter = SkillFrontmatter::new(&name, builtin::description(provider))
            .with_field("generated-by", "sdkbox, from the provider's OpenAPI spec");
        let own = loaded(
            frontmatter,
            builtin::body(provider, api, guides),
            Vec::new(),
        )
        .map_err(|why| SkillsError::Invalid(format!("the provider's own skill: {why}")))?;
        let mut skills = vec![own];
        if let Some(dir) = dir {
            for skill in dir::read(dir)? {
                if skills.iter().any(|s| s.skill.name() == skill.name) {
                    return Err(SkillsError::Invalid(format!(
                        "{}: the skill `{}` has the name of the provider's own skill; rename its \
                         folder and its `name`",
                        dir.display(),
                        skill.name
                    )));
                }
                let entry = loaded(skill.frontmatter, skill.body, skill.files).map_err(|why| {
                    SkillsError::Invalid(format!("{}: {why}", skill.folder.display()))
                })?;
                skills.push(entry);
            }
        }
        Ok(Self { skills })
    }

    /// `skills/list`: every skill, in one page.
    pub fn list(&self) -> ListSkillsResult {
        ListSkillsResult::with_all_items(self.skills.iter().map(|s| s.skill.clone()).collect())
    }

    /// `skills/get`: the skill whose `SKILL.md` is at `uri`.
    pub fn get(&self, uri: &str) -> Option<GetSkillResult> {
        self.skills
            .iter()
            .find(|s| s.skill.uri == uri)
            .map(|s| GetSkillResult::new(s.skill.clone()))
    }

    /// `resources/read` of a skill's file at `uri`; `None` for a URI that is not one.
    pub fn read(&self, uri: &str) -> Option<ReadResourceResult> {
        let file = self
            .skills
            .iter()
            .flat_map(|s| &s.files)
            .find(|f| f.uri == uri)?;
        let contents = match std::str::from_utf8(&file.bytes) {
            Ok(text) if crate::spec::is_text_media_type(&file.media_type) => {
                ResourceContents::TextResourceContents {
                    uri: file.uri.clone(),
                    mime_type: Some(file.media_type.clone()),
                    text: text.to_owned(),
                    meta: None,
                }
            }
            _ => {
                use base64::Engine;
                ResourceContents::BlobResourceContents {
                    uri: file.uri.clone(),
                    mime_type: Some(file.media_type.clone()),
                    blob: base64::engine::general_purpose::STANDARD.encode(&file.bytes),
                    meta: None,
                }
            }
        };
        Some(ReadResourceResult::new(vec![contents]))
    }

    /// Whether `uri` names a skill's file (or would, under this scheme).
    pub fn owns(uri: &str) -> bool {
        uri.starts_with(SCHEME)
    }

    /// The operator's skills' sections, for the docs index: one guide per skill,
    /// `skill <name>`. The provider's own skill is not indexed: its text is the general
    /// how-to the hits already carry, and indexed (even its pagination, authentication and
    /// errors alone) it moved the operations' ranking by meaning on the demo's frozen cases.
    pub fn sections(&self) -> Vec<GuideSection> {
        self.skills
            .iter()
            .skip(1)
            .flat_map(|s| split_guide(&format!("skill {}", s.skill.name()), &s.body))
            .collect()
    }
}

/// A skill's entry from its frontmatter, its body and its other files (paths relative to
/// its folder, with their media types): `SKILL.md` is written from the first two.
fn loaded(
    frontmatter: SkillFrontmatter,
    body: String,
    others: Vec<(String, String, Vec<u8>)>,
) -> Result<Loaded, String> {
    let name = frontmatter.name.clone();
    let yaml = serde_yaml_ng::to_string(&frontmatter).map_err(|e| e.to_string())?;
    let text = format!("---\n{yaml}---\n\n{body}");
    let root = format!("{SCHEME}{name}/");
    let mut files = vec![File {
        uri: format!("{root}SKILL.md"),
        media_type: "text/markdown".into(),
        bytes: text.into_bytes(),
    }];
    files.extend(others.into_iter().map(|(path, media_type, bytes)| File {
        uri: format!("{root}{path}"),
        media_type,
        bytes,
    }));
    let manifest = files
        .iter()
        .map(|f| SkillResource::from_bytes(&f.uri, &f.bytes))
        .collect();
    let skill = Skill::new(
        format!("{root}SKILL.md"),
        frontmatter,
        SkillResources::Files(manifest),
    );
    skill.validate().map_err(|e| e.to_string())?;
    Ok(Loaded { skill, body, files })
}
