//! The operator's skills, read once at startup from `[skills] dir`: each folder under it
//! that holds a `SKILL.md` (YAML frontmatter with `name`, the folder's name, and
//! `description`) is a skill, with the files beside it and below. Hidden entries and
//! symbolic links are skipped; skills, files and bytes are bounded.

use std::path::{Path, PathBuf};

use rmcp::model::SkillFrontmatter;

/// Skills a directory may hold.
const MAX_SKILLS: usize = 64;

/// Files one skill may hold, `SKILL.md` included.
const MAX_FILES: usize = 64;

/// Bytes one skill's files may hold together.
const MAX_BYTES: u64 = 2 * 1024 * 1024;

/// How deep a skill's files may be below its folder.
const MAX_DEPTH: usize = 4;

/// Why the skills could not be read.
#[derive(Debug, thiserror::Error)]
pub enum SkillsError {
    /// The directory or a file in it could not be read.
    #[error("cannot read the skills in {path}: {error}")]
    Read {
        /// Where.
        path: PathBuf,
        /// Why.
        error: std::io::Error,
    },
    /// A skill breaks a rule; the message says which and how to mend it.
    #[error("{0}")]
    Invalid(String),
}

/// One skill as read from its folder.
pub struct Read {
    /// Its folder, for messages.
    pub folder: PathBuf,
    /// Its name.
    pub name: String,
    /// Its frontmatter.
    pub frontmatter: SkillFrontmatter,
    /// `SKILL.md` after the frontmatter.
    pub body: String,
    /// Its other files: path under the folder, media type, bytes.
    pub files: Vec<(String, String, Vec<u8>)>,
}

/// Every skill under `dir`, by folder name.
pub fn read(dir: &Path) -> Result<Vec<Read>, SkillsError> {
    let mut folders: Vec<PathBuf> = entries(dir)?
        .into_iter()
        .filter(|path| regular_file(&path.join("SKILL.md")))
        .collect();
    folders.sort();
    if folders.len() > MAX_SKILLS {
        return Err(SkillsError::Invalid(format!(
            "{}: {} skills, over the {MAX_SKILLS} a server serves",
            dir.display(),
            folders.len()
        )));
    }
    folders.iter().map(|folder| skill(folder)).collect()
}

/// The visible folders (not links) directly in `dir`, or its visible files.
fn entries(dir: &Path) -> Result<Vec<PathBuf>, SkillsError> {
    let failed = |error| SkillsError::Read {
        path: dir.to_owned(),
        error,
    };
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(failed)? {
        let entry = entry.map_err(failed)?;
        let hidden = entry.file_name().to_string_lossy().starts_with('.');
        let kind = entry.file_type().map_err(failed)?;
        if !hidden && !kind.is_symlink() && (kind.is_dir() || kind.is_file()) {
            out.push(entry.path());
        }
    }
    Ok(out)
}

/// Whether `path` is a regular file itself, not a link to one.
fn regular_file(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_file())
}

/// The skill in `folder`.
fn skill(folder: &Path) -> Result<Read, SkillsError> {
    let invalid = |why: String| SkillsError::Invalid(format!("{}: {why}", folder.display()));
    let path = folder.join("SKILL.md");
    let failed = |error| SkillsError::Read {
        path: path.clone(),
        error,
    };
    if std::fs::symlink_metadata(&path).map_err(failed)?.len() > MAX_BYTES {
        return Err(invalid(format!("SKILL.md is over {} MiB", MAX_BYTES >> 20)));
    }
    let text = std::fs::read_to_string(&path).map_err(failed)?;
    let (yaml, body) = split_frontmatter(&text).ok_or_else(|| {
        invalid("SKILL.md must start with YAML frontmatter between `---` lines".into())
    })?;
    let frontmatter: SkillFrontmatter = serde_yaml_ng::from_str(yaml).map_err(|e| {
        invalid(format!(
            "SKILL.md's frontmatter needs `name` and `description`: {e}"
        ))
    })?;
    let folder_name = folder
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    if frontmatter.name != folder_name {
        return Err(invalid(format!(
            "the skill's `name` ({}) must be its folder's name ({folder_name})",
            frontmatter.name
        )));
    }
    let mut files = Vec::new();
    let mut bytes = text.len() as u64;
    collect(folder, folder, 0, &mut files, &mut bytes).map_err(|e| match e {
        SkillsError::Invalid(why) => invalid(why),
        other => other,
    })?;
    Ok(Read {
        folder: folder.to_owned(),
        name: frontmatter.name.clone(),
        frontmatter,
        body: body.to_owned(),
        files,
    })
}

/// The files under `dir` (but `SKILL.md` at the top), within the bounds.
fn collect(
    root: &Path,
    dir: &Path,
    depth: usize,
    files: &mut Vec<(String, String, Vec<u8>)>,
    bytes: &mut u64,
) -> Result<(), SkillsError> {
    let mut entries = entries(dir)?;
    entries.sort();
    for path in entries {
        if depth == 0 && path.file_name().is_some_and(|n| n == "SKILL.md") {
            continue;
        }
        if path.is_dir() {
            if depth + 1 >= MAX_DEPTH {
                return Err(SkillsError::Invalid(format!(
                    "{} is deeper than {MAX_DEPTH} folders",
                    path.display()
                )));
            }
            collect(root, &path, depth + 1, files, bytes)?;
            continue;
        }
        let failed = |error| SkillsError::Read {
            path: path.clone(),
            error,
        };
        *bytes += std::fs::metadata(&path).map_err(failed)?.len();
        if files.len() + 2 > MAX_FILES || *bytes > MAX_BYTES {
            return Err(SkillsError::Invalid(format!(
                "over {MAX_FILES} files or {} MiB",
                MAX_BYTES >> 20
            )));
        }
        let segments: Option<Vec<String>> = path
            .strip_prefix(root)
            .unwrap_or(&path)
            .components()
            .map(|c| c.as_os_str().to_str().map(encode_segment))
            .collect();
        let Some(segments) = segments else {
            return Err(SkillsError::Invalid(format!(
                "{}: a file name that is not UTF-8; rename it",
                path.display()
            )));
        };
        let content = std::fs::read(&path).map_err(failed)?;
        files.push((segments.join("/"), media_type(&path).to_owned(), content));
    }
    Ok(())
}

/// A file or folder name as a segment of a URI: every byte but the unreserved ones
/// (RFC 3986: letters, digits, `-`, `.`, `_`, `~`) percent-encoded.
fn encode_segment(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for byte in name.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// `SKILL.md`'s frontmatter and body.
fn split_frontmatter(text: &str) -> Option<(&str, &str)> {
    let rest = text
        .strip_prefix("---\n")
        .or_else(|| text.strip_prefix("---\r\n"))?;
    let end = rest.find("\n---")?;
    let body = rest[end + 4..].trim_start_matches(['-', '\r']);
    Some((&rest[..end], body.strip_prefix('\n').unwrap_or(body)))
}

/// A file's media type by its extension.
fn media_type(path: &Path) -> &'static str {
    match path.extension().and_then(|e| e.to_str()).unwrap_or("") {
        "md" | "markdown" => "text/markdown",
        "txt" => "text/plain",
        "json" => "application/json",
        "yaml" | "yml" => "application/yaml",
        "ts" => "text/x-typescript",
        "js" | "mjs" => "text/javascript",
        "py" => "text/x-python",
        "sh" => "text/x-shellscript",
        "csv" => "text/csv",
        "html" => "text/html",
        "png" => "image/png",
        "svg" => "image/svg+xml",
        _ => "application/octet-stream",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_folder_of_skills_is_read_with_its_files_and_rules() {
        let dir = tempfile::tempdir().unwrap();
        let refunds = dir.path().join("refunds");
        std::fs::create_dir_all(refunds.join("scripts")).unwrap();
        std::fs::write(
            refunds.join("SKILL.md"),
            "---\nname: refunds\ndescription: \"How we refund: check, then refund\"\n---\n# Refunds\n\n## Steps\nCheck the charge.\n",
        )
        .unwrap();
        std::fs::write(refunds.join("scripts/refund.ts"), "export default 1").unwrap();
        std::fs::create_dir_all(dir.path().join(".hidden")).unwrap();
        std::fs::write(dir.path().join(".hidden/SKILL.md"), "x").unwrap();
        let skills = read(dir.path()).unwrap();
        assert_eq!(skills.len(), 1);
        assert_eq!(skills[0].name, "refunds");
        assert!(
            skills[0].body.starts_with("# Refunds"),
            "{}",
            skills[0].body
        );
        assert_eq!(skills[0].files[0].0, "scripts/refund.ts");

        std::fs::write(
            refunds.join("SKILL.md"),
            "---\nname: other\ndescription: d\n---\nx",
        )
        .unwrap();
        let error = read(dir.path()).err().unwrap().to_string();
        assert!(error.contains("folder's name"), "{error}");
        std::fs::write(refunds.join("SKILL.md"), "no frontmatter").unwrap();
        let error = read(dir.path()).err().unwrap().to_string();
        assert!(error.contains("frontmatter"), "{error}");
    }

    #[test]
    fn links_are_not_followed_and_sizes_and_names_are_held() {
        let dir = tempfile::tempdir().unwrap();
        let outside = dir.path().join("outside.md");
        std::fs::write(&outside, "---\nname: leak\ndescription: d\n---\nsecret").unwrap();
        let skills = dir.path().join("skills");
        std::fs::create_dir_all(skills.join("leak")).unwrap();
        std::os::unix::fs::symlink(&outside, skills.join("leak/SKILL.md")).unwrap();
        assert!(
            read(&skills).unwrap().is_empty(),
            "a linked SKILL.md was read"
        );

        let big = skills.join("big");
        std::fs::create_dir_all(&big).unwrap();
        let mut text = "---\nname: big\ndescription: d\n---\n".to_owned();
        text.push_str(&"x".repeat(3 << 20));
        std::fs::write(big.join("SKILL.md"), text).unwrap();
        let error = read(&skills).err().unwrap().to_string();
        assert!(error.contains("over 2 MiB"), "{error}");
        std::fs::remove_dir_all(&big).unwrap();

        let odd = skills.join("odd");
        std::fs::create_dir_all(&odd).unwrap();
        std::fs::write(
            odd.join("SKILL.md"),
            "---\nname: odd\ndescription: d\n---\nx",
        )
        .unwrap();
        std::fs::write(odd.join("a b#c?d.md"), "x").unwrap();
        let read = read(&skills).unwrap();
        assert_eq!(read[0].files[0].0, "a%20b%23c%3Fd.md");
    }
}
