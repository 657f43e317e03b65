//! Fairness between callers. Every shared resource a caller can fill (type checks, HTTP
//! lanes, event streams, approval questions, introspections) is bounded per
//! [`Principal`] as well as in total, with part of each total kept for principals that hold
//! none of it yet, so that one caller, however many sessions or connections it opens, cannot
//! take the service from the others. Past its share a caller is refused at once with a
//! [`Refused`] that names the limit, never queued without bound.

mod principal;
mod queue;
mod rate;
mod settings;
mod shares;

pub use principal::Principal;
pub use queue::{FairQueue, QueueLimits, Turn};
pub use rate::{Bucket, Rate};
pub use settings::{Fairness, FairnessFile};
pub use shares::{Share, ShareLimits, Shares};

/// Why a principal was refused a share.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    /// The principal holds (or waits for) as many as one principal may.
    #[error(
        "you already have {held} {what} in progress, the most one caller may have at once; \
         retry once one has finished"
    )]
    Yours {
        /// What was refused (`type checks`, `requests`...).
        what: &'static str,
        /// How many the principal has.
        held: usize,
    },
    /// The server's total is reached (what is left is kept for callers that hold none).
    #[error("the server has as many {what} in progress as it takes; retry in a few seconds")]
    Total {
        /// What was refused.
        what: &'static str,
    },
}
