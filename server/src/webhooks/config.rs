//! The webhooks file (`--webhooks-file`): one `[[webhooks]]` entry per endpoint, checked
//! when it is loaded so a mistake names the entry and what to fix.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use http::Uri;
use serde::Deserialize;

use crate::locks::{Event, EventKind};

/// One `[[webhooks]]` entry.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Webhook {
    /// Identifies the webhook's cursor in the replicated state: renaming one restarts it
    /// from the oldest retained event.
    pub name: String,
    pub url: String,
    pub secret: String,
    /// Only these kinds (empty or absent = all).
    #[serde(default)]
    pub kinds: BTreeSet<EventKind>,
    /// Only events touching a namespace with one of these prefixes (empty or absent = all).
    #[serde(default)]
    pub namespaces: Vec<String>,
    #[serde(skip)]
    pub(super) uri: Option<Uri>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WebhooksFile {
    #[serde(default)]
    webhooks: Vec<Webhook>,
}

impl Webhook {
    /// Whether this webhook wants `e` (same rules as WatchEvents' filters).
    pub fn wants(&self, e: &Event) -> bool {
        e.matches(&self.kinds, &self.namespaces)
    }

    fn validate(&mut self) -> Result<(), String> {
        let valid_name = |c: char| c.is_ascii_alphanumeric() || "-_.".contains(c);
        if self.name.is_empty() || self.name.len() > 64 || !self.name.chars().all(valid_name) {
            return Err(format!("name {:?} must be 1-64 characters of letters, digits, '-', '_' or '.'", self.name));
        }
        let uri: Uri = self.url.parse().map_err(|e| format!("url {:?} is not a URL: {e}", self.url))?;
        if !matches!(uri.scheme_str(), Some("http" | "https")) || uri.host().is_none() {
            return Err(format!("url {:?} must be an http:// or https:// URL with a host", self.url));
        }
        if self.secret.is_empty() {
            return Err("secret is empty; set a random string the receiver also knows (it signs every request)".into());
        }
        self.uri = Some(uri);
        Ok(())
    }
}

/// Why a webhooks file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum WebhooksFileError {
    /// The file cannot be read.
    #[error("cannot read webhooks file {} (--webhooks-file)", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The file does not hold valid webhooks.
    #[error("webhooks file {}", path.display())]
    Invalid {
        path: PathBuf,
        #[source]
        source: InvalidWebhooks,
    },
}

/// What is wrong with the text of a webhooks file.
#[derive(Debug, thiserror::Error)]
pub enum InvalidWebhooks {
    /// Not TOML of the expected shape (the parser names the line and the field).
    #[error(transparent)]
    Toml(#[from] toml::de::Error),
    /// An entry breaks a rule; the message names the entry and what to fix.
    #[error("{0}")]
    Entry(String),
}

/// Reads and validates a webhooks file.
pub fn load(path: &Path) -> Result<Vec<Webhook>, WebhooksFileError> {
    let text =
        std::fs::read_to_string(path).map_err(|source| WebhooksFileError::Read { path: path.to_path_buf(), source })?;
    parse(&text).map_err(|source| WebhooksFileError::Invalid { path: path.to_path_buf(), source })
}

/// Parses the TOML of a webhooks file; errors name the entry and what to fix.
pub fn parse(text: &str) -> Result<Vec<Webhook>, InvalidWebhooks> {
    let file: WebhooksFile = toml::from_str(text)?;
    let mut names = BTreeSet::new();
    let mut hooks = file.webhooks;
    for (i, hook) in hooks.iter_mut().enumerate() {
        hook.validate()
            .map_err(|e| InvalidWebhooks::Entry(format!("[[webhooks]] entry {} ({:?}): {e}", i + 1, hook.name)))?;
        if !names.insert(hook.name.clone()) {
            return Err(InvalidWebhooks::Entry(format!(
                "two [[webhooks]] entries are named {:?}; names must be unique",
                hook.name
            )));
        }
    }
    Ok(hooks)
}

#[cfg(test)]
mod tests {
    use super::super::payload::tests::revoked;
    use super::*;

    fn hook(extra: &str) -> Webhook {
        let text = format!("[[webhooks]]\nname = \"ops\"\nurl = \"http://127.0.0.1:9/hook\"\nsecret = \"s\"\n{extra}");
        parse(&text).unwrap().remove(0)
    }

    #[test]
    fn a_valid_file_parses_with_optional_filters() {
        let hooks = parse(
            r#"
            [[webhooks]]
            name = "ops"
            url = "https://hooks.example.com/dls"
            secret = "s3cret"
            kinds = ["deadlock_resolved", "lock_revoked"]
            namespaces = ["billing-"]

            [[webhooks]]
            name = "audit"
            url = "http://127.0.0.1:8080/"
            secret = "x"
            "#,
        )
        .unwrap();
        assert_eq!(hooks.len(), 2);
        assert_eq!(hooks[0].kinds, BTreeSet::from([EventKind::DeadlockResolved, EventKind::LockRevoked]));
        assert!(hooks[1].kinds.is_empty() && hooks[1].namespaces.is_empty());
        assert!(parse("").unwrap().is_empty());
    }

    #[test]
    fn mistakes_in_the_file_are_named() {
        let entry = |name: &str, url: &str, secret: &str| {
            format!("[[webhooks]]\nname = \"{name}\"\nurl = \"{url}\"\nsecret = \"{secret}\"\n")
        };
        let err = |text: String| parse(&text).unwrap_err().to_string();
        assert!(err(entry("a", "http://h/", "") + "").contains("secret is empty"));
        assert!(err(entry("a", "ftp://h/", "s")).contains("must be an http:// or https:// URL"));
        assert!(err(entry("a", "not a url", "s")).contains("is not a URL"));
        assert!(err(entry("", "http://h/", "s")).contains("name \"\" must be"));
        assert!(err(entry("a b", "http://h/", "s")).contains("must be 1-64 characters"));
        assert!(err(entry("a", "http://h/", "s") + &entry("a", "http://g/", "t"))
            .contains("named \"a\"; names must be unique"));
        assert!(err(entry("a", "http://h/", "s") + "kinds = [\"lock_stolen\"]").contains("lock_stolen"));
        assert!(err(entry("a", "http://h/", "s") + "kind = [\"lock_revoked\"]").contains("unknown field `kind`"));
    }

    #[test]
    fn filters_match_kinds_and_namespace_prefixes() {
        assert!(hook("").wants(&revoked("billing-eu")));
        assert!(hook("kinds = [\"lock_revoked\"]").wants(&revoked("x")));
        assert!(!hook("kinds = [\"deadlock_resolved\"]").wants(&revoked("x")));
        assert!(hook("namespaces = [\"reports\", \"billing-\"]").wants(&revoked("billing-eu")));
        assert!(!hook("namespaces = [\"billing-\"]").wants(&revoked("reports")));
    }
}
