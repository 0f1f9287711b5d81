//! Active refresh of trust anchors under automated updates (RFC 5011 §2.3): the anchored
//! zone's DNSKEY RRset is fetched from the servers (not the cache), validated from the zone's
//! current anchors, and applied to the keys' states ([`crate::anchor_update`]); the revoked
//! keys in it are checked for their own signature over the RRset (§2.1) first. The caller
//! passes the clock and schedules the next refresh after [`AnchorRefresh::next`] seconds
//! (after a failure, [`crate::anchor_update::retry_interval`]).

use pqdns_core::dnssec::validate::UnverifiedRRset;
use pqdns_core::wire::rdata::Dnskey;
use pqdns_core::{Name, RrType};

use super::{ResolveError, Resolver};
use crate::anchor_update::{query_interval, Change, FLAG_REVOKE};

/// What one refresh did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AnchorRefresh {
    /// The keys whose state changed.
    pub changes: Vec<Change>,
    /// Seconds until the next refresh ([`query_interval`] of the RRset's original TTL and
    /// the validity left to its signatures).
    pub next: u64,
    /// The original TTL of the DNSKEY RRset (from its RRSIGs), seconds, for the retry
    /// interval after a failure.
    pub original_ttl: u32,
}

/// Why a refresh did not update the state.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AnchorRefreshError {
    /// The zone has no configured trust anchor, or automated updates are off.
    #[error("{0} has no trust anchor under automated updates")]
    NotManaged(Name),
    /// No answer could be had.
    #[error("DNSKEY query for {zone} failed: {error}")]
    Resolve {
        /// The zone.
        zone: Name,
        /// Why.
        error: ResolveError,
    },
    /// The DNSKEY RRset is not Secure from the current anchors (RFC 5011 §2.2 uses only a
    /// validated RRset); the state is left alone.
    #[error("the DNSKEY RRset of {zone} did not validate: {reason}")]
    NotSecure {
        /// The zone.
        zone: Name,
        /// The validation status.
        reason: String,
    },
    /// The state file could not be written (the state in memory is updated).
    #[error("cannot write the trust anchor state: {0}")]
    Save(std::io::Error),
}

/// The smallest original TTL (seconds) and signature expiration (32-bit UNIX time) of RRSIG
/// RDATA `rrsigs` (RFC 4034 §3.1: original TTL at bytes 4-7, expiration at 8-11).
fn rrsig_times(rrsigs: &[Vec<u8>]) -> Option<(u32, u32)> {
    let field = |r: &[u8], at: usize| Some(u32::from_be_bytes(r.get(at..at + 4)?.try_into().ok()?));
    rrsigs
        .iter()
        .filter_map(|r| Some((field(r, 4)?, field(r, 8)?)))
        .reduce(|a, b| (a.0.min(b.0), a.1.min(b.1)))
}

impl Resolver {
    /// The zones whose anchors are updated automatically: every anchored zone when
    /// [`super::Config::anchor_state`] is set, none otherwise.
    pub fn managed_zones(&self) -> Vec<Name> {
        let config = &self.inner.config;
        match config.anchor_state {
            Some(_) => config.anchors.zones().cloned().collect(),
            None => Vec::new(),
        }
    }

    /// One active refresh (RFC 5011 §2.3) of the trust anchor at `zone` at `now` (UNIX
    /// seconds): see the module documentation.
    ///
    /// # Errors
    /// [`AnchorRefreshError`]: the zone is not managed, no answer, an answer that is not
    /// Secure, or the state file could not be written.
    pub async fn refresh_trust_anchor(
        &self,
        zone: &Name,
        now: u64,
    ) -> Result<AnchorRefresh, AnchorRefreshError> {
        let trust = &self.inner.trust;
        if !trust.is_managed(zone) {
            return Err(AnchorRefreshError::NotManaged(zone.clone()));
        }
        // Validated from the anchors as they are now, not from keys trusted earlier.
        trust.forget(zone);
        let answer = self.refresh(zone, RrType::DNSKEY).await.map_err(|error| {
            AnchorRefreshError::Resolve {
                zone: zone.clone(),
                error,
            }
        })?;
        let not_secure = |reason: String| AnchorRefreshError::NotSecure {
            zone: zone.clone(),
            reason,
        };
        if !answer.status().is_secure() {
            return Err(not_secure(answer.status().to_string()));
        }
        // The RRset as the server sent it, with every RRSIG (those by revoked keys included).
        let sent = answer
            .unvalidated_messages()
            .iter()
            .flat_map(|m| UnverifiedRRset::group(&m.answers))
            .find(|s| s.owner == *zone && s.rtype == RrType::DNSKEY)
            .ok_or_else(|| not_secure("no DNSKEY RRset in the answer".into()))?;
        let verified = answer
            .answers()
            .iter()
            .find(|s| s.owner() == zone && s.rtype() == RrType::DNSKEY)
            .ok_or_else(|| not_secure("no validated DNSKEY RRset".into()))?;
        let rrset: Vec<Vec<u8>> = verified.records().into_iter().map(|r| r.rdata).collect();
        let mut self_signed = Vec::new();
        for key in &rrset {
            if Dnskey::parse(key).is_some_and(|k| k.flags & FLAG_REVOKE != 0)
                && trust.signed_by(key.clone(), sent.clone()).await
            {
                self_signed.push(key.clone());
            }
        }
        let changes = trust
            .observe_anchor(zone, &rrset, &self_signed, now)
            .map_err(AnchorRefreshError::Save)?;
        for c in &changes {
            tracing::info!(%zone, key_tag = c.key_tag, from = ?c.from, to = ?c.to, "trust anchor key state (RFC 5011)");
        }
        let (original_ttl, expiration) = rrsig_times(&sent.rrsigs).unwrap_or((sent.ttl, u32::MAX));
        let left = u64::from(expiration).saturating_sub(now);
        Ok(AnchorRefresh {
            changes,
            next: query_interval(original_ttl, left),
            original_ttl,
        })
    }
}
