"""schemathesis hooks for scripts/schemathesis.sh (loaded through SCHEMATHESIS_HOOKS).

POST /v1/imports takes NDJSON (application/x-ndjson), which schemathesis has no serializer
for: its body is a string (lines of JSON) in openapi.yaml, sent as its UTF-8 bytes, and any
other generated value (a negative case) as one JSON line.
"""
import json

import schemathesis


@schemathesis.serializer("application/x-ndjson")
def ndjson(ctx, value):
    if isinstance(value, bytes):
        return {"data": value}
    if isinstance(value, str):
        return {"data": value.encode("utf-8", "replace")}
    return {"data": (json.dumps(value) + "\n").encode("utf-8")}
