"""Schemathesis hooks of `make api-fuzz` (scripts/api-fuzz.sh loads them with SCHEMATHESIS_HOOKS).

A document's precomputed `vector` must have its collection's dimension, which the API document cannot state
(each collection has its own, `GET /v1/collections/{name}` shows it). A generated document whose vector is valid
by the schema (a list of numbers) gets one of the fuzzed collection's dimension, so that ingest is fuzzed past
that check; a vector the generator made invalid on purpose is left as it is, to be refused.

A re-embedding names a model the router runs (its own embedder, or a local model it loads), which no pattern can
state either: a generated model name that is valid by the schema becomes one the router runs (not its default, so
that a job can start), and the collection path and the body's shape are what gets fuzzed.
"""

import os

import schemathesis

DIMENSION = int(os.environ["ATTEST_FUZZ_DIMENSION"])


def _is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


REEMBED_MODEL = "all-minilm-l6-v2"


@schemathesis.hook
def map_body(context, body):
    if context.operation.path.endswith("/reembed"):
        if isinstance(body, dict) and isinstance(body.get("embedder"), str) and body["embedder"]:
            body["embedder"] = REEMBED_MODEL
        return body
    if not context.operation.path.endswith("/documents"):
        return body
    documents = body.get("documents") if isinstance(body, dict) else None
    for document in documents if isinstance(documents, list) else []:
        vector = document.get("vector") if isinstance(document, dict) else None
        if isinstance(vector, list) and vector and all(_is_number(x) for x in vector):
            document["vector"] = [0.5] * DIMENSION
    return body
