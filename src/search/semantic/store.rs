//! Operation embeddings on disk, so that only the first start with a spec and a model pays for
//! them: one file per (model, embedding texts), named by a digest of both, written whole or
//! not at all (a temporary file renamed into place).

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

const MAGIC: &[u8; 8] = b"SDKBXEM1";

/// The file for these texts embedded by the model with `model_digest`; `version` is the
/// embedding text's version, so a change to how texts are built never meets old vectors.
pub fn path(dir: &Path, model_digest: &str, version: u32, texts: &[String]) -> PathBuf {
    let mut digest = Sha256::new();
    digest.update(model_digest.as_bytes());
    digest.update(version.to_le_bytes());
    for text in texts {
        digest.update((text.len() as u64).to_le_bytes());
        digest.update(text.as_bytes());
    }
    let name = crate::hex::hex(&digest.finalize()[..16]);
    dir.join(format!("{name}.emb"))
}

/// The `rows` vectors of `dimensions` in `path`, if it holds exactly that.
pub fn load(path: &Path, rows: usize, dimensions: usize) -> Option<Vec<f32>> {
    let bytes = std::fs::read(path).ok()?;
    let body = bytes.strip_prefix(MAGIC)?;
    let (header, values) = body.split_at_checked(16)?;
    let stored_rows = u64::from_le_bytes(header[..8].try_into().ok()?);
    let stored_dimensions = u64::from_le_bytes(header[8..].try_into().ok()?);
    if stored_rows != rows as u64
        || stored_dimensions != dimensions as u64
        || values.len() != rows * dimensions * 4
    {
        return None;
    }
    Some(
        values
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect(),
    )
}

/// Writes `vectors` (`rows` of `dimensions`) to `path`.
pub fn save(path: &Path, rows: usize, dimensions: usize, vectors: &[f32]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let mut bytes = Vec::with_capacity(MAGIC.len() + 16 + vectors.len() * 4);
    bytes.extend_from_slice(MAGIC);
    bytes.extend_from_slice(&(rows as u64).to_le_bytes());
    bytes.extend_from_slice(&(dimensions as u64).to_le_bytes());
    for value in vectors {
        bytes.extend_from_slice(&value.to_le_bytes());
    }
    let mut temporary = tempfile::NamedTempFile::new_in(dir)?;
    std::io::Write::write_all(&mut temporary, &bytes)?;
    temporary.as_file().sync_all()?;
    temporary.persist(path).map_err(|e| e.error)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests fail loudly by design")]
    use super::*;

    #[test]
    fn vectors_come_back_only_for_the_same_texts_model_and_shape() {
        let dir = tempfile::tempdir().unwrap();
        let texts = vec!["a".to_owned(), "b".to_owned()];
        let file = path(dir.path(), "model", 1, &texts);
        save(&file, 2, 3, &[1.0, 2.0, 3.0, 4.0, 5.0, 6.5]).unwrap();
        assert_eq!(load(&file, 2, 3).unwrap(), [1.0, 2.0, 3.0, 4.0, 5.0, 6.5]);
        assert!(load(&file, 3, 2).is_none(), "another shape");
        assert_ne!(file, path(dir.path(), "other model", 1, &texts));
        assert_ne!(file, path(dir.path(), "model", 2, &texts));
        assert_ne!(file, path(dir.path(), "model", 1, &texts[..1]));
        std::fs::write(&file, b"SDKBXEM1short").unwrap();
        assert!(load(&file, 2, 3).is_none(), "a cut file is ignored");
    }
}
