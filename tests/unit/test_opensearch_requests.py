"""The JSON korpus sends to OpenSearch, as pure functions: names, versions, the template's shape. What the cluster
does with it (kNN under filters, the analyzer, BM25) is tested on the real node in tests/integration/
test_opensearch_backend.py."""

import numpy as np
import pytest

from tasks.index.opensearch_requests import (
    index_name,
    index_template,
    lexical_body,
    server_version,
    visible,
)

pytestmark = pytest.mark.unit
VECTOR = np.asarray([0.1, 0.2, 0.3], dtype=np.float32)
SCOPES = ["public", "hr"]


def test_template_is_strict_russian_and_cosine_hnsw() -> None:
    template = index_template("korpus", 384)
    mappings = template["template"]["mappings"]
    assert template["index_patterns"] == ["korpus-chunks-*"]
    assert mappings["dynamic"] == "strict"
    assert mappings["properties"]["text"]["analyzer"] == "russian"
    assert mappings["properties"]["text"]["fields"]["exact"]["analyzer"] == "korpus_exact"
    assert mappings["properties"]["embedding"] == {
        "type": "knn_vector",
        "dimension": 384,
        "method": {"name": "hnsw", "engine": "lucene", "space_type": "cosinesimil"},
    }
    assert template["template"]["settings"]["index"]["knn"] is True


def test_names_versions_and_lexical_filters() -> None:
    assert index_name("korpus", "multilingual-e5-small", 384) == "korpus-chunks-multilingual-e5-small-384"
    assert server_version({"version": {"number": "2.19.1"}}) == (2, 19)
    assert server_version({"version": {"number": "3.0.0-beta1"}}) == (3, 0)
    body = lexical_body("договор", ["public"], 10, stemmed=False)
    assert body["query"]["bool"]["must"] == [{"match": {"text.exact": {"query": "договор"}}}]
    either = body["query"]["bool"]["filter"][1]["bool"]["should"]
    assert either == [{"bool": {"filter": [{"term": {"tenant": "default"}}, {"terms": {"access": ["public"]}}]}}]
    tenants = visible(["public", "acme/public", "acme/hr"])[1]["bool"]["should"]
    assert [clause["bool"]["filter"] for clause in tenants] == [
        [{"term": {"tenant": "default"}}, {"terms": {"access": ["public"]}}],
        [{"term": {"tenant": "acme"}}, {"terms": {"access": ["public", "hr"]}}],
    ]
