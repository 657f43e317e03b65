//! The last step of every execution, in the process that holds egress: parse the result,
//! scrub the secret from everything the caller will see, then cut it to size.

use super::outcome::{ErrorKind, ExecError, Outcome, ReturnedFile, Timings, Truncation};
use super::report::Report;
use super::{ExecLimits, bound, truncate};
use crate::approval::Planned;
use crate::egress::{CallRecord, Scrubber};

/// What egress and the approval gate recorded during a run.
#[derive(Default)]
pub struct Logs {
    /// The call log, and the number of calls past its bound.
    pub calls: (Vec<CallRecord>, usize),
    /// A dry run's unsent writes, and the number past the plan's bound.
    pub plan: (Vec<Planned>, usize),
    /// What the model is told about approvals to be given outside the execution.
    pub approvals: Vec<String>,
}

/// What replaces an outcome that could not be checked for the secret.
fn withheld() -> Outcome {
    Outcome::failed(ExecError::new(
        ErrorKind::Internal,
        "the outcome could not be checked for the provider secret, so it is withheld",
    ))
}

/// The outcome of a script stopped before it ran (the type check found certain errors): made
/// outside the sandbox, so scrubbed and bounded here like every outcome.
pub fn stopped(error: ExecError, scrubber: &Scrubber, max_output_bytes: usize) -> Outcome {
    let mut outcome = Outcome::failed(error);
    plain_messages(&mut outcome);
    let mut outcome = scrubber.scrub_all(outcome, withheld());
    bound::fit(
        &mut outcome,
        max_output_bytes.saturating_sub(bound::ENVELOPE) / 2,
    );
    outcome
}

/// Adds the type check's `warnings` to a finished outcome: scrubbed, and the whole still held
/// to `max_output_bytes` (the console and the result give way first).
pub fn with_warnings(
    outcome: &mut Outcome,
    warnings: Vec<String>,
    scrubber: &Scrubber,
    max_output_bytes: usize,
) {
    let warnings = warnings.iter().map(|w| super::plain::text(w)).collect();
    outcome.warnings = scrubber.scrub_all(warnings, Vec::new());
    bound::fit(
        outcome,
        max_output_bytes.saturating_sub(bound::ENVELOPE) / 2,
    );
}

/// The files a result returns, each checked for the provider secret as what it is: text
/// scrubbed like any text, other bytes withheld whole when they show it in any form.
fn returned_files(
    files: Vec<crate::egress::FilePart>,
    dropped: Vec<String>,
    scrubber: &Scrubber,
) -> Vec<ReturnedFile> {
    let shown = |text: &str| super::plain::text(&scrubber.scrub(text));
    let mut out: Vec<ReturnedFile> = files
        .into_iter()
        .map(|file| {
            let mut returned = ReturnedFile {
                name: shown(file.name.as_deref().unwrap_or("file")),
                media_type: shown(
                    file.media_type
                        .as_deref()
                        .unwrap_or("application/octet-stream"),
                ),
                size: file.bytes.len(),
                withheld: None,
                bytes: Vec::new(),
            };
            let bytes = file.bytes.0;
            match String::from_utf8(bytes) {
                Ok(text) => returned.bytes = scrubber.scrub(&text).into_owned().into_bytes(),
                Err(binary) => match scrubber.binary_shows_secret(binary.as_bytes()) {
                    None => returned.bytes = binary.into_bytes(),
                    Some(why) => returned.withheld = Some(why.to_owned()),
                },
            }
            returned
        })
        .collect();
    out.extend(dropped.into_iter().map(|name| ReturnedFile {
        name: shown(&name),
        media_type: "application/octet-stream".to_owned(),
        withheld: Some(format!(
            "not sent: the files of one result may hold {} MiB in all",
            super::ops::MAX_RETURNED_BYTES >> 20
        )),
        ..ReturnedFile::default()
    }));
    out
}

/// Turns a run's report and logs into the outcome returned to the caller: scrubbed whole,
/// then held to `limits.max_output_bytes` (half of it; the text rendering of the same
/// outcome gets the other half).
pub fn finish(report: Report, logs: Logs, limits: &ExecLimits, scrubber: &Scrubber) -> Outcome {
    let Logs {
        calls: (http, http_dropped),
        plan: (plan, plan_dropped),
        approvals,
    } = logs;
    let started = std::time::Instant::now();
    let mut error = report.error;
    let mut result = serde_json::Value::Null;
    if let Some(json) = report.result_json {
        match serde_json::from_str(&json) {
            Ok(value) => result = value,
            Err(e) => {
                error = Some(ExecError::new(
                    ErrorKind::Internal,
                    format!("the result could not be read as JSON: {e}"),
                ))
            }
        }
    }
    let mut outcome = Outcome {
        ok: error.is_none(),
        result,
        truncated: None,
        error,
        console: report.console,
        console_dropped: report.console_dropped,
        http,
        http_dropped,
        plan,
        plan_dropped,
        approvals,
        warnings: Vec::new(),
        files: Vec::new(),
        duration_ms: 0,
        timings: Timings::default(),
    };
    // Made plain before it is scrubbed (a control character dropped could join the parts
    // of a secret), and scrubbed before anything is cut (a cut could leave part of an
    // encoded secret behind).
    plain_messages(&mut outcome);
    let mut outcome = scrubber.scrub_all(outcome, withheld());
    outcome.files = returned_files(report.files, report.files_dropped, scrubber);
    let size = truncate::json_size(&outcome.result);
    let original = report.result_cut_from.unwrap_or(size).max(size);
    if original > limits.max_result_chars {
        outcome.result = truncate::fit(&outcome.result, limits.max_result_chars);
        outcome.truncated = Some(Truncation {
            original_chars: original,
            limit_chars: limits.max_result_chars,
        });
    }
    bound::fit(
        &mut outcome,
        limits.max_output_bytes.saturating_sub(bound::ENVELOPE) / 2,
    );
    outcome.timings = Timings {
        compile_us: report.compile_us,
        create_us: report.create_us,
        run_us: report.run_us,
        finish_us: started.elapsed().as_micros() as u64,
    };
    outcome
}

/// Makes the outcome's messages plain text (see `plain.rs`): its error, what it says of
/// approvals, and its calls' errors, dropped headers and decisions. What the script returned
/// and logged is its own.
fn plain_messages(outcome: &mut Outcome) {
    use super::plain::text;
    if let Some(error) = outcome.error.as_mut() {
        error.message = text(&error.message);
        error.name = error.name.as_deref().map(text);
        error.stack = error.stack.as_deref().map(text);
        error.excerpt = error.excerpt.as_deref().map(text);
    }
    for message in &mut outcome.approvals {
        *message = text(message);
    }
    for call in &mut outcome.http {
        call.error = call.error.as_deref().map(text);
        for header in &mut call.dropped_headers {
            *header = text(header);
        }
        if let Some(note) = call.policy.as_mut() {
            note.because = text(&note.because);
            note.by = note.by.as_deref().map(text);
            note.channel = note.channel.as_deref().map(text);
        }
    }
}

#[cfg(test)]
mod checked_tests {
    use super::*;

    const SECRET: &str = "sk_live_4eC39HqLyjWDarjtT1zdp7dc";

    #[test]
    fn what_the_type_check_adds_is_scrubbed_and_bounded_like_every_outcome() {
        let scrubber = Scrubber::for_secret(SECRET);
        let mut error = ExecError::new(ErrorKind::Type, format!("the code was not run: {SECRET}"));
        error.excerpt = Some(format!("const k = \"{SECRET}\"; {}", "x".repeat(200_000)));
        let outcome = stopped(error, &scrubber, 64_000);
        let text = serde_json::to_string(&outcome).unwrap();
        assert!(!text.contains(SECRET), "{text:.300}");
        assert!(text.len() <= 32_000, "{}", text.len());
        let mut finished = Outcome::failed(ExecError::new(ErrorKind::Runtime, "x"));
        with_warnings(
            &mut finished,
            vec![format!("1:1 TS2339: '{SECRET}'"); 3],
            &scrubber,
            64_000,
        );
        assert_eq!(finished.warnings.len(), 3);
        assert!(!serde_json::to_string(&finished).unwrap().contains(SECRET));
    }

    /// A provider's error page coloured for a terminal, or a secret split by a control
    /// character, reaches the caller as plain text without the secret.
    #[test]
    fn messages_are_plain_text_and_made_so_before_they_are_scrubbed() {
        let scrubber = Scrubber::for_secret(SECRET);
        let (head, tail) = SECRET.split_at(10);
        let said = format!("HTTP 400: \u{1b}[31merror\u{1b}[0m: bad key {head}\u{0}{tail}");
        let report = Report::failed(ExecError::new(ErrorKind::Runtime, said.clone()));
        let logs = Logs {
            approvals: vec![said.clone()],
            ..Logs::default()
        };
        let outcome = finish(report, logs, &ExecLimits::default(), &scrubber);
        let message = &outcome.error.as_ref().unwrap().message;
        assert!(
            message.starts_with("HTTP 400: error: bad key "),
            "{message}"
        );
        assert!(
            !message.contains(SECRET) && !message.contains(head),
            "{message}"
        );
        assert!(
            !outcome.approvals[0].contains(head),
            "{:?}",
            outcome.approvals
        );
        let stopped = stopped(ExecError::new(ErrorKind::Type, said), &scrubber, 64_000);
        let message = &stopped.error.as_ref().unwrap().message;
        assert!(
            !message.contains('\u{1b}') && !message.contains(head),
            "{message}"
        );
    }

    /// A returned file is checked as what it is: text scrubbed like text, bytes that show
    /// the secret in any form withheld whole, clean bytes kept byte for byte; files past the
    /// bound are named with why they were not sent.
    #[test]
    fn returned_files_are_scrubbed_or_withheld_whole() {
        use crate::egress::FilePart;
        let scrubber = Scrubber::for_secret(SECRET);
        let file = |name: &str, bytes: Vec<u8>| FilePart {
            name: Some(name.into()),
            media_type: None,
            bytes: bytes.into(),
        };
        let binary = |middle: &[u8]| [&[0xff, 0x00, 0x80][..], middle, &[0xfe]].concat();
        let utf16: Vec<u8> = SECRET.encode_utf16().flat_map(u16::to_le_bytes).collect();
        let files = vec![
            file("notes.txt", format!("key: {SECRET}").into_bytes()),
            file("plain.bin", binary(SECRET.as_bytes())),
            file("wide.bin", binary(&utf16)),
            file("clean.bin", binary(b"nothing")),
        ];
        let out = returned_files(files, vec!["huge.bin".into()], &scrubber);
        let text = String::from_utf8(out[0].bytes.clone()).unwrap();
        assert!(
            !text.contains(SECRET) && text.contains("[redacted]"),
            "{text}"
        );
        for withheld in &out[1..3] {
            assert!(withheld.bytes.is_empty(), "{}", withheld.name);
            assert!(withheld.withheld.as_deref().unwrap().contains("withheld"));
        }
        assert_eq!(out[3].bytes, binary(b"nothing"));
        assert_eq!(out[3].withheld, None);
        assert_eq!(out[4].name, "huge.bin");
        assert!(out[4].withheld.as_deref().unwrap().contains("8 MiB"));
    }
}
