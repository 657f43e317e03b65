//! What `execute` does for a signed-in user when account linking is on: act with their own
//! provider token, or ask them to link. A client with URL-mode elicitation (handshake era)
//! shows the link and the call goes on once the user has linked; any other gets a tool error
//! of kind `link` carrying it, which the model shows, and runs the code again afterwards.

use std::time::Duration;

use rmcp::RoleServer;
use rmcp::model::{CallToolResult, ElicitationAction};
use rmcp::service::RequestContext;

use super::SdkboxServer;
use crate::egress::{AuthScheme, Egress};
use crate::linking::{Access, Linking};
use crate::sandbox::{ErrorKind, ExecError};
use crate::signin::SignedIn;

/// How long a call waits, after the user accepted to open the link, for the link to complete.
const LINK_WAIT: Duration = Duration::from_secs(300);

/// How often a waiting call looks in the store for the link.
const LOOK_EVERY: Duration = Duration::from_secs(2);

impl SdkboxServer {
    /// Egress acting with `user`'s linked provider token; else the result that asks them to
    /// link (or says why linking cannot answer now).
    pub(super) async fn linked_egress(
        &self,
        linking: &Linking,
        user: &SignedIn,
        context: &RequestContext<RoleServer>,
    ) -> Result<Egress, CallToolResult> {
        if user.is_machine() {
            return Err(self.refused(&self.provider.egress, ExecError::new(
                ErrorKind::Link,
                format!(
                    "Nothing ran: this server acts with each person's own {} account, which a machine client (a token without a subject) cannot link. Sign in as a person.",
                    self.provider.name
                ),
            )));
        }
        let who = user.user();
        let mut asked = false;
        loop {
            let access = linking.access(&who).await.map_err(|e| {
                self.refused(
                    &self.provider.egress,
                    ExecError::new(
                        ErrorKind::Internal,
                        format!("{e}; nothing ran. Try again in a moment."),
                    ),
                )
            })?;
            match access {
                Access::Token(token) => {
                    return self.keyed_egress(token, AuthScheme::Bearer).map_err(|e| {
                        self.refused(
                            &self.provider.egress,
                            ExecError::new(ErrorKind::Internal, e.message),
                        )
                    });
                }
                Access::Unlinked => {
                    let (url, id) = linking.offer(&who).await.map_err(|e| {
                        self.refused(
                            &self.provider.egress,
                            ExecError::new(ErrorKind::Internal, e.to_string()),
                        )
                    })?;
                    if !asked
                        && self
                            .linked_through_elicitation(linking, &who, &url, &id, context)
                            .await
                    {
                        asked = true;
                        continue;
                    }
                    return Err(self.refused(&self.provider.egress, ExecError::new(
                        ErrorKind::Link,
                        format!(
                            "Nothing ran: the user must first link their {} account to sdkbox. Show the user this link to open in their browser (valid for a few minutes, once): {url} . Once they have linked it, run the same code again.",
                            self.provider.name
                        ),
                    )));
                }
            }
        }
    }

    /// Shows `url` through URL-mode elicitation and waits for the link to complete; whether
    /// it did. False at once when the client cannot be asked (no URL mode, the 2026-07-28 era,
    /// a stateless request).
    async fn linked_through_elicitation(
        &self,
        linking: &Linking,
        who: &str,
        url: &url::Url,
        id: &str,
        context: &RequestContext<RoleServer>,
    ) -> bool {
        // Listen before asking: the browser may finish before the answer arrives.
        let mut completions = linking.completions();
        let message = format!(
            "Link your {} account to sdkbox: open this page and allow access. The request continues once it is linked.",
            self.provider.name
        );
        let asked = context
            .peer
            .elicit_url_with_timeout(message, url.clone(), id, Some(LINK_WAIT))
            .await;
        match asked {
            Ok(ElicitationAction::Accept) => {}
            Ok(_) => return false,
            Err(error) => {
                tracing::debug!("no URL elicitation for the link: {error}");
                return false;
            }
        }
        // Woken by a completion in this process, or finding the link in the store (another
        // replica took the callback) at the next look.
        let waited = tokio::time::timeout(LINK_WAIT, async {
            let mut look = tokio::time::interval(LOOK_EVERY);
            loop {
                tokio::select! {
                    completed = completions.recv() => match completed {
                        Ok(user) if user == who => return true,
                        Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                        Err(tokio::sync::broadcast::error::RecvError::Closed) => return false,
                    },
                    _ = look.tick() => {
                        if matches!(linking.access(who).await, Ok(Access::Token(_))) {
                            return true;
                        }
                    }
                }
            }
        });
        tokio::select! {
            done = waited => done.unwrap_or(false),
            _ = context.ct.cancelled() => false,
        }
    }
}
