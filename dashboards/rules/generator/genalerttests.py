import yaml
RB = "https://github.com/skiff-dev/skiff/blob/main/docs/runbooks.md#"
class Lit(str): pass
yaml.add_representer(Lit, lambda d, s: d.represent_scalar("tag:yaml.org,2002:str", s, style="|"))
PACE = {"14.4": "2 % of its 30-day error budget in an hour", "6": "5 % of its 30-day error budget in 6 hours", "1": "its whole 30-day error budget in 30 days"}
WIN = {"14.4": ("1h", "5m", "critical"), "6": ("6h", "30m", "critical"), "1": ("3d", "6h", "warning")}

def burn(name, slo, what, vs, factor, pct):
    lw, sw, sev = WIN[factor]
    return {"exp_labels": {"severity": sev, "slo": slo, "long_window": lw, "short_window": sw, "burn_rate": factor,
                           "namespace": "web", "virtualserver": vs},
            "exp_annotations": {
                "summary": f"VirtualServer web/{vs} is spending its {slo} error budget {factor}x too fast.",
                "description": f"Over the last {lw} (and still over the last {sw}), {pct} of the requests of VirtualServer web/{vs} were {what}: {factor} times the rate its {slo} objective (spec.slo, or the default) allows, a pace that spends {PACE[factor]}.",
                "runbook_url": RB + name.lower()}}

def s(series, values):
    return {"series": series, "values": values}

def req(vs, code, values):
    return s(f'skiff_http_requests_total{{namespace="web",virtualserver="{vs}",pod="{vs}-0",vhost="{vs}",method="GET",code="{code}"}}', values)
def bucket(vs, le, values):
    return s(f'skiff_http_request_duration_seconds_bucket{{namespace="web",virtualserver="{vs}",pod="{vs}-0",vhost="{vs}",le="{le}"}}', values)
def count(vs, values):
    return s(f'skiff_http_request_duration_seconds_count{{namespace="web",virtualserver="{vs}",pod="{vs}-0",vhost="{vs}"}}', values)
OP = 'job="skiff-operator",pod="skiff-operator-0"'

tests = []
# 1. Burn rates.
av = "SkiffAvailabilityBudgetBurn"; lat = "SkiffLatencyBudgetBurn"
A = lambda vs, f, p: burn(av, "availability", "answered 5xx", vs, f, p)
L = lambda vs, f, p: burn(lat, "latency", "slower than its latency threshold", vs, f, p)
tests.append({
    "interval": "1m",
    "input_series": [
        # shop: 1 request in 4 answered 5xx and 1 in 4 slower than 0.25 s; objectives from
        # the operator (availability 0.999, latency 0.99 under 0.25 s).
        req("shop", 200, "0+3x200"), req("shop", 500, "0+1x200"),
        bucket("shop", "0.25", "0+3x200"), bucket("shop", "+Inf", "0+4x200"), count("shop", "0+4x200"),
        s(f'skiff_operator_virtualserver_slo_objective{{namespace="web",virtualserver="shop",slo="availability",{OP}}}', "0.999x200"),
        s(f'skiff_operator_virtualserver_slo_objective{{namespace="web",virtualserver="shop",slo="latency",{OP}}}', "0.99x200"),
        s(f'skiff_operator_virtualserver_slo_latency_threshold_seconds{{namespace="web",virtualserver="shop",le="0.25",{OP}}}', "0.25x200"),
        # slowburn: 1 in 100 answered 5xx, 10x its default budget (0.1 %): above 6x, below 14.4x;
        # every request under its threshold of 1 s.
        req("slowburn", 200, "0+99x200"), req("slowburn", 502, "0+1x200"),
        bucket("slowburn", "0.25", "0+50x200"), bucket("slowburn", "1.0", "0+100x200"), count("slowburn", "0+100x200"),
        s(f'skiff_operator_virtualserver_slo_latency_threshold_seconds{{namespace="web",virtualserver="slowburn",le="1.0",{OP}}}', "1x200"),
        # calm: no 5xx, all fast.
        req("calm", 200, "0+4x200"), bucket("calm", "0.25", "0+4x200"), count("calm", "0+4x200"),
        # strict: 1 in 100 answered 5xx against a 0.9995 objective: 20x, pages at 14.4x.
        req("strict", 200, "0+99x200"), req("strict", 500, "0+1x200"),
        bucket("strict", "0.25", "0+100x200"), count("strict", "0+100x200"),
        s(f'skiff_operator_virtualserver_slo_objective{{namespace="web",virtualserver="strict",slo="availability",{OP}}}', "0.9995x200"),
    ],
    "alert_rule_test": [
        # Pending, not yet firing.
        {"eval_time": "1m", "alertname": av, "exp_alerts": []},
        {"eval_time": "1m", "alertname": lat, "exp_alerts": []},
        # After 30 minutes: the 14.4x (for 2m) and 6x (for 15m) pages fire, the ticket (for 1h) waits.
        {"eval_time": "30m", "alertname": av, "exp_alerts": [
            A("shop", "14.4", "25%"), A("shop", "6", "25%"), A("slowburn", "6", "1%"),
            A("strict", "14.4", "1%"), A("strict", "6", "1%")]},
        {"eval_time": "30m", "alertname": lat, "exp_alerts": [L("shop", "14.4", "25%"), L("shop", "6", "25%")]},
        {"eval_time": "2h", "alertname": av, "exp_alerts": [
            A("shop", "14.4", "25%"), A("shop", "6", "25%"), A("shop", "1", "25%"),
            A("slowburn", "6", "1%"), A("slowburn", "1", "1%"),
            A("strict", "14.4", "1%"), A("strict", "6", "1%"), A("strict", "1", "1%")]},
        {"eval_time": "2h", "alertname": lat, "exp_alerts": [
            L("shop", "14.4", "25%"), L("shop", "6", "25%"), L("shop", "1", "25%")]},
    ],
})

def simple(name, sev, summary, description, **labels):
    return {"exp_labels": {"severity": sev, **labels},
            "exp_annotations": {"summary": summary, "description": description, "runbook_url": RB + name.lower()}}

# 2. A pool with no endpoint up; another pool with one pod still reaching an endpoint.
name = "SkiffPoolNoEndpointUp"
def ep(vs, pod, pool, state, values):
    return s(f'skiff_upstream_endpoints{{namespace="web",virtualserver="{vs}",pod="{pod}",pool="{pool}",state="{state}"}}', values)
tests.append({
    "interval": "1m",
    "input_series": [
        ep("shop", "shop-0", "php", "up", "2x9 0x30"), ep("shop", "shop-0", "php", "down", "0x9 2x30"),
        ep("shop", "shop-1", "php", "up", "2x9 0x30"), ep("shop", "shop-1", "php", "down", "0x9 2x30"),
        ep("shop", "shop-0", "api", "up", "1x9 0x30"), ep("shop", "shop-1", "api", "up", "1x39"),
        ep("docs", "docs-0", "app", "up", "1x39"),
    ],
    "alert_rule_test": [
        {"eval_time": "9m", "alertname": name, "exp_alerts": []},
        {"eval_time": "13m", "alertname": name, "exp_alerts": []},
        {"eval_time": "16m", "alertname": name, "exp_alerts": [simple(name, "critical",
            "Backend pool php of VirtualServer web/shop has no endpoint up.",
            "No edge pod of VirtualServer web/shop has an endpoint of pool php up (every one is down after max_fails failures, or the pool has none): the requests its rules send there fail with 502/503.",
            namespace="web", virtualserver="shop", pool="php")]},
    ],
})

# 3. A saturated pool: queue_full rejections for more than 10 minutes.
name = "SkiffPoolSaturated"
def fail(vs, pod, pool, reason, values):
    return s(f'skiff_upstream_failures_total{{namespace="web",virtualserver="{vs}",pod="{pod}",pool="{pool}",reason="{reason}"}}', values)
tests.append({
    "interval": "1m",
    "input_series": [
        fail("shop", "shop-0", "php", "queue_full", "0x10 0+30x30"),
        fail("shop", "shop-1", "php", "queue_full", "0x10 0+30x30"),
        # Timeouts are not saturation.
        fail("shop", "shop-0", "api", "timeout", "0+60x40"),
    ],
    "alert_rule_test": [
        {"eval_time": "10m", "alertname": name, "exp_alerts": []},
        {"eval_time": "20m", "alertname": name, "exp_alerts": []},
        {"eval_time": "30m", "alertname": name, "exp_alerts": [simple(name, "warning",
            "Backend pool php of VirtualServer web/shop is at capacity.",
            "Pool php of VirtualServer web/shop has turned requests away with 503 for 10 minutes (1/s now) because its active requests reached max_active_requests. Capacity is measured by these rejections, skiff_upstream_failures_total{reason=\"queue_full\"}, which every pool reports, whether or not its worker count (skiff_upstream_workers) is known.",
            namespace="web", virtualserver="shop", pool="php")]},
    ],
})

# 3b. Connections: shop-0 at 95 % of its limit for 20 minutes; shop-1 at 50 %, and docs-0
# above 90 % for only 10 minutes.
name = "SkiffConnectionsNearLimit"
def conns(vs, pod, metric, values):
    return s(f'skiff_connections_{metric}{{namespace="web",virtualserver="{vs}",pod="{pod}"}}', values)
tests.append({
    "interval": "1m",
    "input_series": [
        conns("shop", "shop-0", "open", "100x5 9500x40"), conns("shop", "shop-0", "max", "10000x45"),
        conns("shop", "shop-1", "open", "5000x45"), conns("shop", "shop-1", "max", "10000x45"),
        conns("docs", "docs-0", "open", "9800x10 100x35"), conns("docs", "docs-0", "max", "10000x45"),
    ],
    "alert_rule_test": [
        {"eval_time": "15m", "alertname": name, "exp_alerts": []},
        {"eval_time": "25m", "alertname": name, "exp_alerts": [simple(name, "warning",
            "Pod shop-0 of VirtualServer web/shop is near its connection limit.",
            "For 15 minutes pod shop-0 of VirtualServer web/shop has held more than 90 % of the connections it admits (95% now). At the limit a new connection takes the place of the longest-idle keep-alive one (skiff_connections_reclaimed_total), and waits unserved when none is idle.",
            namespace="web", virtualserver="shop", pod="shop-0")]},
    ],
})

# 4. Reload failures.
name = "SkiffConfigReloadFailed"
def reloads(pod, result, values):
    return s(f'skiff_config_reloads_total{{namespace="web",virtualserver="shop",pod="{pod}",result="{result}"}}', values)
tests.append({
    "interval": "1m",
    "input_series": [
        reloads("shop-0", "success", "0x10 1x40"), reloads("shop-0", "failure", "0x20 1x30"),
        reloads("shop-1", "success", "0x10 1x40"), reloads("shop-1", "failure", "0x50"),
    ],
    "alert_rule_test": [
        {"eval_time": "15m", "alertname": name, "exp_alerts": []},
        {"eval_time": "25m", "alertname": name, "exp_alerts": [simple(name, "warning",
            "Pod shop-0 of VirtualServer web/shop refused a new configuration.",
            "Pod shop-0 of VirtualServer web/shop failed to reload its configuration in the last 15 minutes and keeps serving its previous configuration, so a change to the VirtualServer is not live there.",
            namespace="web", virtualserver="shop", pod="shop-0")]},
        # 15 minutes after the failure it is forgotten.
        {"eval_time": "45m", "alertname": name, "exp_alerts": []},
    ],
})

# 4b. An htpasswd line left out, for more than 5 minutes; fixed, the alert ends.
name = "SkiffBasicAuthEntriesLeftOut"
tests.append({
    "interval": "1m",
    "input_series": [
        s('skiff_basic_auth_entries_left_out{namespace="web",virtualserver="shop",pod="shop-0"}', "0x5 1x20 0x10"),
        s('skiff_basic_auth_entries_left_out{namespace="web",virtualserver="shop",pod="shop-1"}', "0x40"),
    ],
    "alert_rule_test": [
        {"eval_time": "8m", "alertname": name, "exp_alerts": []},
        {"eval_time": "15m", "alertname": name, "exp_alerts": [simple(name, "warning",
            "Pod shop-0 of VirtualServer web/shop left 1 htpasswd entries out.",
            "Pod shop-0 of VirtualServer web/shop serves a configuration whose htpasswd files have 1 lines it refused (not bcrypt, malformed, cost above 14): those users cannot sign in.",
            namespace="web", virtualserver="shop", pod="shop-0")]},
        {"eval_time": "30m", "alertname": name, "exp_alerts": []},
    ],
})

# 5. Pods serving different configurations for more than 10 minutes.
name = "SkiffConfigHashDiverged"
def info(vs, pod, h, values):
    return s(f'skiff_config_info{{namespace="web",virtualserver="{vs}",pod="{pod}",hash="{h}"}}', values)
tests.append({
    "interval": "1m",
    "input_series": [
        # shop: shop-1 moves to b at once, shop-0 stays on a.
        info("shop", "shop-0", "a", "1x40"),
        info("shop", "shop-1", "a", "1x4"), info("shop", "shop-1", "b", "_x4 1x35"),
        # docs: a rollout that converges within 5 minutes.
        info("docs", "docs-0", "a", "1x4"), info("docs", "docs-0", "b", "_x4 1x35"),
        info("docs", "docs-1", "a", "1x9"), info("docs", "docs-1", "b", "_x9 1x30"),
    ],
    "alert_rule_test": [
        {"eval_time": "10m", "alertname": name, "exp_alerts": []},
        {"eval_time": "20m", "alertname": name, "exp_alerts": [simple(name, "warning",
            "The pods of VirtualServer web/shop serve 2 different configurations.",
            "For more than 10 minutes the edge pods of VirtualServer web/shop have served 2 different configuration hashes (skiff_config_info): a rollout or reload has not converged.",
            namespace="web", virtualserver="shop")]},
    ],
})

# 6. Certificates. 90-day ones alert at 14 days left (one has 10 days, one 60); 24-hour ones
# at 4 hours (one has 10 hours, one 3); a pod without notBefore at 14 days (13 days, 20).
name = "SkiffCertificateExpiringSoon"
def cert(vhost, expires, lifetime, pod="shop-0"):
    labels = f'namespace="web",virtualserver="shop",pod="{pod}",vhost="{vhost}"'
    expiry = s(f"skiff_tls_certificate_expiry_timestamp_seconds{{{labels}}}", f"{expires}x30")
    if lifetime is None:  # an older image, without the notBefore gauge
        return [expiry]
    return [expiry, s(f"skiff_tls_certificate_not_before_timestamp_seconds{{{labels}}}", f"{expires - lifetime}x30")]
DAY = 86400
tests.append({
    "interval": "1m",
    "input_series": cert("shop", 10 * DAY, 90 * DAY) + cert("shop-tls-0", 60 * DAY, 90 * DAY)
        + cert("shop-tls-1", 36000, DAY) + cert("shop-tls-2", 10800, DAY)
        + cert("shop-tls-3", 13 * DAY, None, pod="shop-old") + cert("shop-tls-4", 20 * DAY, None, pod="shop-old"),
    "alert_rule_test": [
        {"eval_time": "10m", "alertname": name, "exp_alerts": []},
        {"eval_time": "20m", "alertname": name, "exp_alerts": [simple(name, "warning",
            "The certificate of shop (VirtualServer web/shop) expires in 9d 23h 40m 0s.",
            "The certificate the edge pods of VirtualServer web/shop serve for shop has less than a sixth of its lifetime (at most 14 days) left, 9d 23h 40m 0s, and has not been renewed; clients will refuse it once it expires.",
            namespace="web", virtualserver="shop", vhost="shop"), simple(name, "warning",
            "The certificate of shop-tls-2 (VirtualServer web/shop) expires in 2h 40m 0s.",
            "The certificate the edge pods of VirtualServer web/shop serve for shop-tls-2 has less than a sixth of its lifetime (at most 14 days) left, 2h 40m 0s, and has not been renewed; clients will refuse it once it expires.",
            namespace="web", virtualserver="shop", vhost="shop-tls-2"), simple(name, "warning",
            "The certificate of shop-tls-3 (VirtualServer web/shop) expires in 12d 23h 40m 0s.",
            "The certificate the edge pods of VirtualServer web/shop serve for shop-tls-3 has less than a sixth of its lifetime (at most 14 days) left, 12d 23h 40m 0s, and has not been renewed; clients will refuse it once it expires.",
            namespace="web", virtualserver="shop", vhost="shop-tls-3")]},
    ],
})

# 7. The operator failing to reconcile for 15 minutes; a single error is no alert.
name = "SkiffOperatorReconcileFailing"
def err(reason, values):
    return s(f'skiff_operator_reconcile_errors_total{{namespace="skiff-system",pod="skiff-operator-0",job="skiff-operator",reason="{reason}"}}', values)
tests.append({
    "interval": "1m",
    "input_series": [err("apply", "0x5 0+1x60"), err("conflict", "0x5 1x60")],
    "alert_rule_test": [
        {"eval_time": "15m", "alertname": name, "exp_alerts": []},
        {"eval_time": "30m", "alertname": name, "exp_alerts": [simple(name, "warning",
            "The skiff operator skiff-system/skiff-operator-0 keeps failing to reconcile (apply).",
            "For 15 minutes the skiff operator skiff-system/skiff-operator-0 has failed reconciles with reason apply (10 in the last 10 minutes): changes to VirtualServers are not applied.",
            namespace="skiff-system", pod="skiff-operator-0", reason="apply")]},
    ],
})

header = """# promtool test rules: every alert in ../skiff-rules.yaml, not firing (too early, or
# below its threshold) and firing, with its labels and annotations (as kubernetes-mixin
# tests its alerts). Generated by ../generator/genalerttests.py: edit that, not this.
"""
print(header + yaml.dump({"rule_files": ["../skiff-rules.yaml"], "evaluation_interval": "1m", "tests": tests}, sort_keys=False, width=200), end="")
