//! The service's Prometheus metrics, served at `GET /metrics` in the OpenMetrics text format.
//!
//! | metric | type | labels | counts |
//! |---|---|---|---|
//! | `assignor_assignments_total` | counter | `tenant`, `assignor` | computations committed as the group's new target |
//! | `assignor_assignment_failures_total` | counter | `tenant`, `assignor`, `kind` | computations that failed, by error kind (`out-of-fuel`, `timeout`, `invalid-output`, …) |
//! | `assignor_assignment_fuel` | histogram | `tenant`, `assignor` | fuel of each successful sandboxed computation (built-ins use none) |
//! | `assignor_assignment_duration_seconds` | histogram | `tenant`, `assignor` | wall time of each computation, failed ones included |
//! | `assignor_uploads_total` | counter | `tenant`, `outcome` | uploads: `accepted`, or the check that rejected them (`size`, `load`, `name`, `trial`, `policy`) |
//! | `assignor_capture_writes_total` | counter | `tenant`, `outcome` | writes of failed computations' captures to the store (a capture stored, or a dropped one deleted): `written`, `lost` (on a store replicas share, another replica wrote the group's capture first; the newer one stays), `failed` (the store refused it, logged; a capture is then kept in memory only) |
//! | `assignor_watch_events_total` | counter | `event` | on a store replicas share, what the store's watch brought: changes `applied` or `refused` (logged with their key), watches `resumed` after a break, `reset`s (every key read again after a compaction) |
//!
//! A computation skipped because its group's target was current, or because a failing
//! assignor is being backed off, runs nothing and counts nowhere.
//!
//! The labels name tenants and their uploads, which one tenant must not learn about another,
//! so the endpoint answers only the admin token (Prometheus sends it with `authorization:
//! {credentials: …}` in the scrape config).

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use assignor_coordinator::CaptureWrite;
use assignor_sandbox::ErrorKind;

/// The content type of [`Metrics::encode`]'s text.
pub(crate) const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct AssignorLabels {
    tenant: String,
    assignor: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FailureLabels {
    tenant: String,
    assignor: String,
    kind: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct WatchLabels {
    event: String,
}

/// The counter of the store's watch events, for the thread that applies them.
#[derive(Debug, Clone)]
pub(crate) struct WatchMetrics(Family<WatchLabels, Counter>);

impl WatchMetrics {
    /// Counts one `event` (`applied`, `refused`, `resumed`, `reset`).
    pub(crate) fn count(&self, event: &str) {
        self.0
            .get_or_create(&WatchLabels {
                event: event.to_owned(),
            })
            .inc();
    }
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    tenant: String,
    outcome: String,
}

type HistogramFamily = Family<AssignorLabels, Histogram, fn() -> Histogram>;

/// Every metric the service keeps, and the registry that encodes them.
#[derive(Debug)]
pub(crate) struct Metrics {
    registry: Registry,
    assignments: Family<AssignorLabels, Counter>,
    failures: Family<FailureLabels, Counter>,
    fuel: HistogramFamily,
    duration: HistogramFamily,
    uploads: Family<OutcomeLabels, Counter>,
    capture_writes: Family<OutcomeLabels, Counter>,
    watch: WatchMetrics,
}

/// Fuel buckets: 10 thousand to 10 billion units by factors of ten (a 10-member sticky call
/// uses a few hundred thousand, a 1000-member one tens of millions, the default limit is a
/// billion).
fn fuel_histogram() -> Histogram {
    Histogram::new(exponential_buckets(1e4, 10.0, 7))
}

/// Duration buckets: 100 µs to about 6.5 s by factors of two, which covers a small group's
/// call and the default 5 s deadline.
fn duration_histogram() -> Histogram {
    Histogram::new(exponential_buckets(1e-4, 2.0, 17))
}

impl Metrics {
    pub(crate) fn new() -> Self {
        let mut registry = Registry::with_prefix("assignor");
        let assignments = Family::default();
        let failures = Family::default();
        let fuel: HistogramFamily = Family::new_with_constructor(fuel_histogram);
        let duration: HistogramFamily = Family::new_with_constructor(duration_histogram);
        let uploads = Family::default();
        let capture_writes = Family::default();
        let watch = WatchMetrics(Family::default());
        registry.register(
            "watch_events",
            "What the store's watch brought, on a store replicas share",
            watch.0.clone(),
        );
        registry.register(
            "assignments",
            "Computations committed as a group's new target assignment",
            assignments.clone(),
        );
        registry.register(
            "assignment_failures",
            "Computations that failed, by error kind; the group kept its previous target",
            failures.clone(),
        );
        registry.register(
            "assignment_fuel",
            "Fuel used by each successful sandboxed computation",
            fuel.clone(),
        );
        registry.register(
            "assignment_duration_seconds",
            "Wall time of each computation, failed ones included",
            duration.clone(),
        );
        registry.register(
            "uploads",
            "Uploads, by outcome: accepted or the check that rejected them",
            uploads.clone(),
        );
        registry.register(
            "capture_writes",
            "Writes of failed computations' captures to the store, by outcome: written, lost \
             (another replica's capture stays) or failed (kept in memory only)",
            capture_writes.clone(),
        );
        Self {
            registry,
            assignments,
            failures,
            fuel,
            duration,
            uploads,
            capture_writes,
            watch,
        }
    }

    /// The watch events' counter.
    pub(crate) fn watch(&self) -> WatchMetrics {
        self.watch.clone()
    }

    /// Records one computation by `assignor` for `tenant`: its wall time, and its fuel on
    /// success or its error kind on failure.
    pub(crate) fn assignment(
        &self,
        tenant: &str,
        assignor: &str,
        duration: Duration,
        outcome: Result<Option<u64>, ErrorKind>,
    ) {
        let labels = AssignorLabels {
            tenant: tenant.to_owned(),
            assignor: assignor.to_owned(),
        };
        self.duration
            .get_or_create(&labels)
            .observe(duration.as_secs_f64());
        match outcome {
            Ok(fuel) => {
                self.assignments.get_or_create(&labels).inc();
                if let Some(fuel) = fuel {
                    self.fuel.get_or_create(&labels).observe(fuel as f64);
                }
            }
            Err(kind) => {
                self.failures
                    .get_or_create(&FailureLabels {
                        tenant: labels.tenant,
                        assignor: labels.assignor,
                        kind: kind.as_str().to_owned(),
                    })
                    .inc();
            }
        }
    }

    /// Records an upload's outcome: `accepted` or the failed check.
    pub(crate) fn upload(&self, tenant: &str, outcome: &str) {
        self.uploads
            .get_or_create(&OutcomeLabels {
                tenant: tenant.to_owned(),
                outcome: outcome.to_owned(),
            })
            .inc();
    }

    /// What counts `tenant`'s capture writes, for its coordinator
    /// (`Coordinator::on_capture_write`).
    pub(crate) fn capture_writes(
        &self,
        tenant: &str,
    ) -> impl Fn(CaptureWrite) + Send + Sync + 'static {
        let (family, tenant) = (self.capture_writes.clone(), tenant.to_owned());
        move |outcome: CaptureWrite| {
            family
                .get_or_create(&OutcomeLabels {
                    tenant: tenant.clone(),
                    outcome: outcome.as_str().to_owned(),
                })
                .inc();
        }
    }

    /// Every metric in the OpenMetrics text format.
    pub(crate) fn encode(&self) -> String {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.registry)
            .expect("writing to a String cannot fail");
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Successes feed the counter and both histograms, failures the per-kind counter; the
    /// text names tenant and assignor on every series; capture writes count by outcome.
    #[test]
    fn assignments_and_failures_are_encoded_with_their_labels() {
        let m = Metrics::new();
        m.assignment("a", "sticky", Duration::from_millis(2), Ok(Some(250_000)));
        m.assignment(
            "a",
            "loop",
            Duration::from_secs(1),
            Err(ErrorKind::OutOfFuel),
        );
        m.upload("a", "trial");
        let count = m.capture_writes("a");
        count(CaptureWrite::Failed);
        count(CaptureWrite::Failed);
        let text = m.encode();
        for line in [
            r#"assignor_assignments_total{tenant="a",assignor="sticky"} 1"#,
            r#"assignor_assignment_failures_total{tenant="a",assignor="loop",kind="out-of-fuel"} 1"#,
            r#"assignor_assignment_fuel_count{tenant="a",assignor="sticky"} 1"#,
            r#"assignor_assignment_duration_seconds_count{tenant="a",assignor="loop"} 1"#,
            r#"assignor_uploads_total{tenant="a",outcome="trial"} 1"#,
            r#"assignor_capture_writes_total{tenant="a",outcome="failed"} 2"#,
        ] {
            assert!(text.contains(line), "{line} missing from:\n{text}");
        }
    }
}
