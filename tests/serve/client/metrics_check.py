"""Parses a running kvforge server's /metrics with the Prometheus client's own parser
and checks every metric the server documents is there with its type and a sane value.
Usage: python3 metrics_check.py BASE_URL MIN_REQUESTS"""
import sys
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

base, min_requests = sys.argv[1], int(sys.argv[2])
text = urllib.request.urlopen(f"{base}/metrics").read().decode()
families = {f.name: f for f in text_string_to_metric_families(text)}
want = {
    "kvforge_requests_running": "gauge",
    "kvforge_requests_waiting": "gauge",
    "kvforge_kv_cache_usage_ratio": "gauge",
    "kvforge_prefix_cache_queries": "counter",
    "kvforge_prefix_cache_hits": "counter",
    "kvforge_prompt_tokens": "counter",
    "kvforge_generation_tokens": "counter",
    "kvforge_preemptions": "counter",
    "kvforge_request_finished": "counter",
    "kvforge_time_to_first_token_seconds": "histogram",
    "kvforge_inter_token_latency_seconds": "histogram",
    "kvforge_e2e_request_latency_seconds": "histogram",
}
for name, kind in want.items():
    assert name in families, f"{name} is missing"
    assert families[name].type == kind, f"{name} is a {families[name].type}, not a {kind}"


def sample(family, suffix, labels=None):
    for s in families[family].samples:
        if s.name == family + suffix and (labels is None or all(s.labels.get(k) == v for k, v in labels.items())):
            return s.value
    raise AssertionError(f"{family}{suffix} {labels} has no sample")


e2e = sample("kvforge_e2e_request_latency_seconds", "_count")
assert e2e >= min_requests, f"{e2e} requests observed, expected at least {min_requests}"
assert sample("kvforge_time_to_first_token_seconds", "_count") >= min_requests
assert sample("kvforge_generation_tokens", "_total") >= min_requests
assert sample("kvforge_prefix_cache_hits", "_total") > 0, "repeated prompts should hit the prefix cache"
assert sample("kvforge_prefix_cache_hits", "_total") <= sample("kvforge_prefix_cache_queries", "_total")
assert 0.0 <= sample("kvforge_kv_cache_usage_ratio", "") <= 1.0
buckets = [s for s in families["kvforge_time_to_first_token_seconds"].samples if s.name.endswith("_bucket")]
assert buckets[-1].labels["le"] == "+Inf"
assert all(a.value <= b.value for a, b in zip(buckets, buckets[1:])), "buckets must be cumulative"
assert buckets[-1].value == sample("kvforge_time_to_first_token_seconds", "_count")
print(f"metrics: {len(families)} families parsed, {int(e2e)} requests observed")
