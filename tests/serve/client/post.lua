-- wrk: POST a small greedy completion on every request; the prompt is longer than one
-- 16-token KV block, so repeats of it hit the prefix cache.
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = '{"prompt": "Once upon a time, there was a little girl named Lily. She loved to play outside in the park.", "max_tokens": 8}'
