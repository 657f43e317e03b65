//! The ops behind the web platform the prelude gives scripts (`web.js`): what JavaScript
//! alone does badly or not at all. URLs are parsed and changed by the `url` crate, which
//! implements the WHATWG URL standard (its `quirks` module is the standard's API, as Deno
//! uses it); randomness comes from the operating system; digests and HMAC from aws-lc-rs,
//! the crypto sdkbox already builds for TLS.
//!
//! Like every op, these never panic: a bad input is an empty or `null` answer that the
//! prelude turns into the error the standard names.

use deno_core::op2;
use url::{Url, quirks};

/// A URL's parts as the prelude's `URL` reads them, in this order: href, origin, protocol,
/// username, password, host, hostname, port, pathname, search, hash.
fn parts(url: &Url) -> Vec<String> {
    vec![
        quirks::href(url).to_owned(),
        quirks::origin(url),
        quirks::protocol(url).to_owned(),
        quirks::username(url).to_owned(),
        quirks::password(url).to_owned(),
        quirks::host(url).to_owned(),
        quirks::hostname(url).to_owned(),
        quirks::port(url).to_owned(),
        quirks::pathname(url).to_owned(),
        quirks::search(url).to_owned(),
        quirks::hash(url).to_owned(),
    ]
}

/// `href` parsed, against `base` when `has_base`; `null` when it is not a URL.
#[op2]
#[serde]
pub fn op_sdkbox_url_parse(
    #[string] href: String,
    #[string] base: String,
    has_base: bool,
) -> Option<Vec<String>> {
    let url = if has_base {
        Url::parse(&base).ok()?.join(&href).ok()?
    } else {
        Url::parse(&href).ok()?
    };
    Some(parts(&url))
}

/// `href` with one part set as the standard's setter does (`part` counts as in [`parts`],
/// href being 0); a value the setter ignores leaves the URL as it was. `null` when `href`
/// is not a URL, or a new href is not one.
#[op2]
#[serde]
pub fn op_sdkbox_url_set(
    #[string] href: String,
    part: u32,
    #[string] value: String,
) -> Option<Vec<String>> {
    let mut url = Url::parse(&href).ok()?;
    let value = value.as_str();
    // Setters the standard lets fail quietly: the URL stays as it was.
    let _ = match part {
        0 => {
            quirks::set_href(&mut url, value).ok()?;
            Ok(())
        }
        2 => quirks::set_protocol(&mut url, value),
        3 => quirks::set_username(&mut url, value),
        4 => quirks::set_password(&mut url, value),
        5 => quirks::set_host(&mut url, value),
        6 => quirks::set_hostname(&mut url, value),
        7 => quirks::set_port(&mut url, value),
        8 => {
            quirks::set_pathname(&mut url, value);
            Ok(())
        }
        9 => {
            quirks::set_search(&mut url, value);
            Ok(())
        }
        10 => {
            quirks::set_hash(&mut url, value);
            Ok(())
        }
        _ => Ok(()),
    };
    Some(parts(&url))
}

/// Fills `out` with random bytes from the operating system; false when it cannot.
#[op2(fast)]
pub fn op_sdkbox_random(#[buffer] out: &mut [u8]) -> bool {
    getrandom::fill(out).is_ok()
}

/// The digest of `data` by `algorithm` (`SHA-1`, `SHA-256`, `SHA-384`, `SHA-512`); empty
/// for another name (the prelude names the supported ones first).
#[op2]
#[buffer]
pub fn op_sdkbox_digest(#[string] algorithm: &str, #[buffer] data: &[u8]) -> Vec<u8> {
    match digest_algorithm(algorithm) {
        Some(algorithm) => aws_lc_rs::digest::digest(algorithm, data).as_ref().to_vec(),
        None => Vec::new(),
    }
}

/// The HMAC of `data` under `key` with `hash`; empty for a hash not supported.
#[op2]
#[buffer]
pub fn op_sdkbox_hmac(
    #[string] hash: &str,
    #[buffer] key: &[u8],
    #[buffer] data: &[u8],
) -> Vec<u8> {
    let algorithm = match hash {
        "SHA-1" => aws_lc_rs::hmac::HMAC_SHA1_FOR_LEGACY_USE_ONLY,
        "SHA-256" => aws_lc_rs::hmac::HMAC_SHA256,
        "SHA-384" => aws_lc_rs::hmac::HMAC_SHA384,
        "SHA-512" => aws_lc_rs::hmac::HMAC_SHA512,
        _ => return Vec::new(),
    };
    let key = aws_lc_rs::hmac::Key::new(algorithm, key);
    aws_lc_rs::hmac::sign(&key, data).as_ref().to_vec()
}

fn digest_algorithm(name: &str) -> Option<&'static aws_lc_rs::digest::Algorithm> {
    Some(match name {
        "SHA-1" => &aws_lc_rs::digest::SHA1_FOR_LEGACY_USE_ONLY,
        "SHA-256" => &aws_lc_rs::digest::SHA256,
        "SHA-384" => &aws_lc_rs::digest::SHA384,
        "SHA-512" => &aws_lc_rs::digest::SHA512,
        _ => return None,
    })
}
