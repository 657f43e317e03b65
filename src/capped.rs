//! Reading an HTTP response's body whole within a size bound: what sdkbox fetches for itself
//! (a spec, the issuer's metadata and keys), refused as soon as it would pass the bound.

/// Why a body was not read.
#[derive(Debug, thiserror::Error)]
pub enum CappedError {
    /// It is larger than the bound.
    #[error("larger than {0} bytes")]
    TooLarge(usize),
    /// The connection failed while it was read.
    #[error("{0}")]
    Failed(String),
}

/// The whole body of `response`, at most `limit` bytes.
pub async fn capped_body(
    mut response: reqwest::Response,
    limit: usize,
) -> Result<Vec<u8>, CappedError> {
    if response.content_length().is_some_and(|n| n > limit as u64) {
        return Err(CappedError::TooLarge(limit));
    }
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| CappedError::Failed(e.to_string()))?
    {
        if body.len() + chunk.len() > limit {
            return Err(CappedError::TooLarge(limit));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}
