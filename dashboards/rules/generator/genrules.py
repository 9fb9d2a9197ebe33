"""Writes dashboards/rules/skiff-rules.yaml (on stdout): Skiff's recording rules and alerts.

The windows, burn rates and every alert's text live here, so the 14 SLO recording rules
and 6 burn-rate alerts cannot drift apart. `cargo xtask generate` runs it; `cargo xtask
rules` checks the committed file is its output, then runs promtool on it.
"""
import sys

import yaml  # Debian's python3-yaml

WINDOWS = ["5m", "30m", "1h", "2h", "6h", "1d", "3d"]
NV = "namespace, virtualserver"
RUNBOOK = "https://github.com/skiff-dev/skiff/blob/main/docs/runbooks.md#"

class Lit(str): pass
def lit_rep(d, s):
    return d.represent_scalar("tag:yaml.org,2002:str", s, style="|" if "\n" in s else None)
yaml.add_representer(Lit, lit_rep)

def errors(w):
    return Lit(f"""(
  sum by ({NV}) (rate(skiff_http_requests_total{{code=~"5.."}}[{w}]))
  or
  0 * sum by ({NV}) (rate(skiff_http_requests_total[{w}]))
)
/
sum by ({NV}) (rate(skiff_http_requests_total[{w}]))
""")

def slow(w):
    return Lit(f"""1 - (
  sum by ({NV}) (
    rate(skiff_http_request_duration_seconds_bucket[{w}])
      and on ({NV}, le) skiff_operator_virtualserver_slo_latency_threshold_seconds
    or
    rate(skiff_http_request_duration_seconds_bucket{{le="0.25"}}[{w}])
      unless on ({NV}) skiff_operator_virtualserver_slo_latency_threshold_seconds
  )
  /
  sum by ({NV}) (rate(skiff_http_request_duration_seconds_count[{w}]))
)
""")

slo_rules = []
for w in WINDOWS:
    slo_rules.append({"record": f"namespace_virtualserver:skiff_slo_errors:ratio_rate{w}", "expr": errors(w)})
for w in WINDOWS:
    slo_rules.append({"record": f"namespace_virtualserver:skiff_slo_slow:ratio_rate{w}", "expr": slow(w)})
for slo, default in [("availability", "0.999"), ("latency", "0.99")]:
    slo_rules.append({
        "record": "namespace_virtualserver:skiff_slo_objective:max",
        "expr": Lit(f"""max by ({NV}) (skiff_operator_virtualserver_slo_objective{{slo="{slo}"}})
or
{default} + 0 * count by ({NV}) (skiff_http_requests_total)
"""),
        "labels": {"slo": slo},
    })

long_rules = []
for kind in ["errors", "slow"]:
    src = f"namespace_virtualserver:skiff_slo_{kind}:ratio_rate5m"
    long_rules.append({"record": f"namespace_virtualserver:skiff_slo_{kind}:ratio_rate30d",
                       "expr": Lit(f"sum_over_time({src}[30d])\n/\ncount_over_time({src}[30d])\n")})

heavy = [
    {"record": "namespace_virtualserver:skiff_http_requests:rate5m",
     "expr": Lit(f"sum by ({NV}, code) (rate(skiff_http_requests_total[5m]))\n")},
    {"record": "namespace_virtualserver:skiff_http_request_duration_seconds_bucket:rate5m",
     "expr": Lit(f"sum by ({NV}, le) (rate(skiff_http_request_duration_seconds_bucket[5m]))\n")},
    {"record": "namespace_pool:skiff_upstream_requests:rate5m",
     "expr": Lit(f"sum by ({NV}, pool, code) (rate(skiff_upstream_requests_total[5m]))\n")},
]

# (factor, long, short, severity, for)
BURNS = [("14.4", "1h", "5m", "critical", "2m"), ("6", "6h", "30m", "critical", "15m"), ("1", "3d", "6h", "warning", "1h")]

def burn_alerts(name, kind, slo, what):
    out = []
    for factor, lw, sw, sev, for_ in BURNS:
        budget = f'on ({NV}) group_left () ({factor} * (1 - namespace_virtualserver:skiff_slo_objective:max{{slo="{slo}"}}))'
        out.append({
            "alert": name,
            "expr": Lit(f"""namespace_virtualserver:skiff_slo_{kind}:ratio_rate{lw}
  > {budget}
and on ({NV})
namespace_virtualserver:skiff_slo_{kind}:ratio_rate{sw}
  > {budget}
"""),
            "for": for_,
            "labels": {"severity": sev, "slo": slo, "long_window": lw, "short_window": sw, "burn_rate": factor},
            "annotations": {
                "summary": f"VirtualServer {{{{ $labels.namespace }}}}/{{{{ $labels.virtualserver }}}} is spending its {slo} error budget {factor}x too fast.",
                "description": f"Over the last {lw} (and still over the last {sw}), {{{{ $value | humanizePercentage }}}} of the requests of VirtualServer {{{{ $labels.namespace }}}}/{{{{ $labels.virtualserver }}}} were {what}: {factor} times the rate its {slo} objective (spec.slo, or the default) allows, a pace that spends " + {"14.4": "2 % of its 30-day error budget in an hour", "6": "5 % of its 30-day error budget in 6 hours", "1": "its whole 30-day error budget in 30 days"}[factor] + ".",
                "runbook_url": RUNBOOK + name.lower(),
            },
        })
    return out

alerts = burn_alerts("SkiffAvailabilityBudgetBurn", "errors", "availability", "answered 5xx")
alerts += burn_alerts("SkiffLatencyBudgetBurn", "slow", "latency", "slower than its latency threshold")

def alert(name, expr, for_, sev, summary, description):
    return {"alert": name, "expr": Lit(expr), "for": for_, "labels": {"severity": sev},
            "annotations": {"summary": summary, "description": description, "runbook_url": RUNBOOK + name.lower()}}

VS = "{{ $labels.namespace }}/{{ $labels.virtualserver }}"
alerts += [
    alert("SkiffPoolNoEndpointUp",
          f'sum by ({NV}, pool) (skiff_upstream_endpoints{{state="up"}}) == 0\n', "5m", "critical",
          f"Backend pool {{{{ $labels.pool }}}} of VirtualServer {VS} has no endpoint up.",
          f"No edge pod of VirtualServer {VS} has an endpoint of pool {{{{ $labels.pool }}}} up (every one is down after max_fails failures, or the pool has none): the requests its rules send there fail with 502/503."),
    alert("SkiffPoolSaturated",
          f'sum by ({NV}, pool) (rate(skiff_upstream_failures_total{{reason="queue_full"}}[5m])) > 0\n', "10m", "warning",
          f"Backend pool {{{{ $labels.pool }}}} of VirtualServer {VS} is at capacity.",
          f"Pool {{{{ $labels.pool }}}} of VirtualServer {VS} has turned requests away with 503 for 10 minutes ({{{{ $value | humanize }}}}/s now) because its active requests reached max_active_requests. Capacity is measured by these rejections, skiff_upstream_failures_total{{reason=\"queue_full\"}}, which every pool reports, whether or not its worker count (skiff_upstream_workers) is known."),
    alert("SkiffConnectionsNearLimit",
          f'max by ({NV}, pod) (skiff_connections_open / skiff_connections_max) > 0.9\n', "15m", "warning",
          f"Pod {{{{ $labels.pod }}}} of VirtualServer {VS} is near its connection limit.",
          f"For 15 minutes pod {{{{ $labels.pod }}}} of VirtualServer {VS} has held more than 90 % of the connections it admits ({{{{ $value | humanizePercentage }}}} now). At the limit a new connection takes the place of the longest-idle keep-alive one (skiff_connections_reclaimed_total), and waits unserved when none is idle."),
    alert("SkiffConfigReloadFailed",
          f'sum by ({NV}, pod) (increase(skiff_config_reloads_total{{result="failure"}}[15m])) > 0\n', "1m", "warning",
          f"Pod {{{{ $labels.pod }}}} of VirtualServer {VS} refused a new configuration.",
          f"Pod {{{{ $labels.pod }}}} of VirtualServer {VS} failed to reload its configuration in the last 15 minutes and keeps serving its previous configuration, so a change to the VirtualServer is not live there."),
    alert("SkiffBasicAuthEntriesLeftOut",
          f'max by ({NV}, pod) (skiff_basic_auth_entries_left_out) > 0\n', "5m", "warning",
          f"Pod {{{{ $labels.pod }}}} of VirtualServer {VS} left {{{{ $value }}}} htpasswd entries out.",
          f"Pod {{{{ $labels.pod }}}} of VirtualServer {VS} serves a configuration whose htpasswd files have {{{{ $value }}}} lines it refused (not bcrypt, malformed, cost above 14): those users cannot sign in."),
    alert("SkiffConfigHashDiverged",
          f'count by ({NV}) (count by ({NV}, hash) (skiff_config_info)) > 1\n', "10m", "warning",
          f"The pods of VirtualServer {VS} serve {{{{ $value }}}} different configurations.",
          f"For more than 10 minutes the edge pods of VirtualServer {VS} have served {{{{ $value }}}} different configuration hashes (skiff_config_info): a rollout or reload has not converged."),
    # A sixth of the lifetime, at most 14 days: a 90-day certificate alerts at 14 days left as
    # before, cert-manager renewing at a third left by default; a 24-hour one at 4 hours, not always.
    # A pod without notBefore (an image from before it was exported) gets the 14 days.
    alert("SkiffCertificateExpiringSoon",
          f'min by ({NV}, vhost) (\n'
          '  (skiff_tls_certificate_expiry_timestamp_seconds - time())\n'
          '  < (\n'
          '    clamp_max((skiff_tls_certificate_expiry_timestamp_seconds - skiff_tls_certificate_not_before_timestamp_seconds) / 6, 14 * 86400)\n'
          '    or skiff_tls_certificate_expiry_timestamp_seconds * 0 + 14 * 86400\n'
          '  )\n'
          ')\n', "15m", "warning",
          f"The certificate of {{{{ $labels.vhost }}}} (VirtualServer {VS}) expires in {{{{ $value | humanizeDuration }}}}.",
          f"The certificate the edge pods of VirtualServer {VS} serve for {{{{ $labels.vhost }}}} has less than a sixth of its lifetime (at most 14 days) left, {{{{ $value | humanizeDuration }}}}, and has not been renewed; clients will refuse it once it expires."),
    alert("SkiffOperatorReconcileFailing",
          'sum by (namespace, pod, reason) (increase(skiff_operator_reconcile_errors_total[10m])) > 0\n', "15m", "warning",
          "The skiff operator {{ $labels.namespace }}/{{ $labels.pod }} keeps failing to reconcile ({{ $labels.reason }}).",
          "For 15 minutes the skiff operator {{ $labels.namespace }}/{{ $labels.pod }} has failed reconciles with reason {{ $labels.reason }} ({{ $value | humanize }} in the last 10 minutes): changes to VirtualServers are not applied."),
]

doc = {"groups": [
    {"name": "skiff-slo.rules", "rules": slo_rules},
    {"name": "skiff-slo-30d.rules", "rules": long_rules},
    {"name": "skiff-dashboards.rules", "rules": heavy},
    {"name": "skiff.alerts", "rules": alerts},
]}
header = """# Skiff's recording rules and alerts (Prometheus rule file), generated by
# dashboards/rules/generator/genrules.py (`cargo xtask generate`): edit that, not this.
# The SLO rules and alerts read
# each VirtualServer's objectives from the operator's skiff_operator_virtualserver_slo_*
# gauges (spec.slo, or the defaults: 99.9 % not 5xx, 99 % under 0.25 s). Every alert's
# runbook_url is a section of docs/runbooks.md. Checked and unit-tested by
# `cargo xtask rules` (tests in dashboards/rules/tests/); the chart ships a copy
# (charts/skiff/files/skiff-rules.yaml, written by `cargo xtask generate`).
"""
sys.stdout.write(header + yaml.dump(doc, sort_keys=False, width=200, allow_unicode=True))
