//! `spec.slo`: the VirtualServer's service level objectives. The operator exports them as
//! `skiff_operator_virtualserver_slo_objective` and
//! `skiff_operator_virtualserver_slo_latency_threshold_seconds` (operator/src/metrics.rs),
//! which the recording rules and alerts in `dashboards/rules/` join on; a VirtualServer
//! without `slo` gets the defaults below.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The default availability objective: 99.9 % of requests not answered 5xx.
pub const DEFAULT_AVAILABILITY_TARGET: f64 = 0.999;
/// The default latency objective: 99 % of requests faster than the threshold.
pub const DEFAULT_LATENCY_TARGET: f64 = 0.99;
/// The default latency threshold, in seconds (one of `skiff_config::DURATION_BUCKETS`).
pub const DEFAULT_LATENCY_THRESHOLD: f64 = 0.25;

/// Service level objectives, measured over 30 days from the edge pods' metrics.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Slo {
    /// The share of requests not answered with a 5xx status (default target 0.999).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub availability: Option<AvailabilitySlo>,
    /// The share of requests answered faster than a threshold (default 99 % under 0.25 s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency: Option<LatencySlo>,
}

/// An availability objective.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "double(self.target) > 0.0 && double(self.target) < 1.0",
    "message": "slo.availability.target must be between 0 and 1, both excluded (0.999 is 99.9 %)"
}]))]
pub struct AvailabilitySlo {
    /// The share of requests, over 30 days, that must not be answered 5xx: between 0 and
    /// 1, excluded (`0.999` is 99.9 %, an error budget of 0.1 %).
    #[serde(default = "default_availability_target")]
    pub target: f64,
}

/// A latency objective.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {
        "rule": "double(self.target) > 0.0 && double(self.target) < 1.0",
        "message": "slo.latency.target must be between 0 and 1, both excluded (0.99 is 99 %)"
    },
    {
        "rule": "double(self.thresholdSeconds) in [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0]",
        "message": "slo.latency.thresholdSeconds must be a bound of skiff's request-duration histogram: 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5 or 10"
    }
]))]
pub struct LatencySlo {
    /// Requests answered (response handed to the kernel) within this many seconds are fast.
    /// One of the histogram's bounds: 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
    /// 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10.
    #[serde(default = "default_latency_threshold")]
    pub threshold_seconds: f64,
    /// The share of requests, over 30 days, that must be fast: between 0 and 1, excluded.
    #[serde(default = "default_latency_target")]
    pub target: f64,
}

fn default_availability_target() -> f64 {
    DEFAULT_AVAILABILITY_TARGET
}

fn default_latency_target() -> f64 {
    DEFAULT_LATENCY_TARGET
}

fn default_latency_threshold() -> f64 {
    DEFAULT_LATENCY_THRESHOLD
}

/// The objectives in force, defaults filled in.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Objectives {
    pub availability: f64,
    pub latency: f64,
    pub latency_threshold_seconds: f64,
}

impl Default for Objectives {
    fn default() -> Self {
        Objectives {
            availability: DEFAULT_AVAILABILITY_TARGET,
            latency: DEFAULT_LATENCY_TARGET,
            latency_threshold_seconds: DEFAULT_LATENCY_THRESHOLD,
        }
    }
}

impl Slo {
    /// The objectives of an optional `spec.slo`.
    pub fn objectives(slo: Option<&Slo>) -> Objectives {
        let d = Objectives::default();
        let slo = slo.cloned().unwrap_or_default();
        Objectives {
            availability: slo.availability.map_or(d.availability, |a| a.target),
            latency: slo.latency.as_ref().map_or(d.latency, |l| l.target),
            latency_threshold_seconds: slo
                .latency
                .as_ref()
                .map_or(d.latency_threshold_seconds, |l| l.threshold_seconds),
        }
    }
}

/// A bucket bound as Prometheus stores skiff's `le` label (prometheus-client's rendering:
/// `0.25`, `1.0`, `10.0`), so a rule can join the threshold gauge to the histogram on `le`.
pub fn le_label(seconds: f64) -> String {
    let s = format!("{seconds:?}");
    // `{:?}` of an f64 is the shortest round-trip form with a `.0` for whole numbers, as
    // dtoa (prometheus-client) renders the bounds; switch to plain decimals if it ever
    // picks an exponent.
    if s.contains('e') {
        format!("{seconds}")
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn defaults_fill_what_is_left_out() {
        assert_eq!(Slo::objectives(None), Objectives::default());
        let slo: Slo =
            serde_json::from_value(json!({ "latency": { "thresholdSeconds": 0.5 } })).unwrap();
        assert_eq!(
            Slo::objectives(Some(&slo)),
            Objectives {
                availability: 0.999,
                latency: 0.99,
                latency_threshold_seconds: 0.5
            }
        );
        let slo: Slo = serde_json::from_value(json!({
            "availability": { "target": 0.995 }, "latency": { "target": 0.9 }
        }))
        .unwrap();
        assert_eq!(
            Slo::objectives(Some(&slo)),
            Objectives {
                availability: 0.995,
                latency: 0.9,
                latency_threshold_seconds: 0.25
            }
        );
        let empty: Slo = serde_json::from_value(json!({ "availability": {} })).unwrap();
        assert_eq!(Slo::objectives(Some(&empty)).availability, 0.999);
    }

    #[test]
    fn le_renders_every_bound_as_the_histogram_does() {
        let rendered: Vec<String> = skiff_config::DURATION_BUCKETS
            .iter()
            .map(|b| le_label(*b))
            .collect();
        assert_eq!(
            rendered,
            [
                "0.0001", "0.00025", "0.0005", "0.001", "0.0025", "0.005", "0.01", "0.025", "0.05",
                "0.1", "0.25", "0.5", "1.0", "2.5", "5.0", "10.0"
            ]
        );
    }

    #[test]
    fn the_cel_list_of_thresholds_is_the_histogram_s() {
        let schema = serde_json::to_value(schemars::schema_for!(LatencySlo)).unwrap();
        let rule = schema["x-kubernetes-validations"][1]["rule"]
            .as_str()
            .unwrap();
        let list = rule.split('[').nth(1).unwrap().trim_end_matches(']');
        let bounds: Vec<f64> = list.split(',').map(|b| b.trim().parse().unwrap()).collect();
        assert_eq!(bounds, skiff_config::DURATION_BUCKETS);
    }
}
